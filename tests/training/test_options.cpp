// strata-train's command line: values, and each mistake in its own words (the first on the
// line wins).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/choose.hpp"
#include "errors.hpp"
#include "options.hpp"

namespace strata::train {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "strata-train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const TrainError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, ValuesInBothSpellings) {
  const Options o = parse({"--data", "x.txt", "--layers=2", "--dim", "64", "--zero", "2", "--lr", "3e-4", "--seed",
                           "42", "--bucket-mb=1.5", "--save", "d", "--steps", "5", "--steps", "7"});
  EXPECT_EQ(o.data, "x.txt");
  EXPECT_EQ(o.model.layers, 2);
  EXPECT_EQ(o.model.dim, 64);
  EXPECT_EQ(o.zero, 2);
  EXPECT_FLOAT_EQ(o.lr, 3e-4f);
  EXPECT_EQ(o.seed, 42u);
  EXPECT_DOUBLE_EQ(o.bucket_mb, 1.5);
  EXPECT_EQ(o.save, "d");
  EXPECT_EQ(o.steps, 7);  // the last one
  EXPECT_FALSE(o.help);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"--layers", "2", "--help"}).help);
  const Options mp = parse({"--tp", "2", "--pp=4", "--microbatches", "8", "--schedule", "interleaved",
                            "--virtual-stages", "3", "--sequence-parallel", "--layout", "dp,tp,pp"});
  EXPECT_EQ(mp.tp, 2);
  EXPECT_EQ(mp.pp, 4);
  EXPECT_EQ(mp.microbatches, 8);
  EXPECT_EQ(mp.schedule, "interleaved");
  EXPECT_EQ(mp.virtual_stages, 3);
  EXPECT_TRUE(mp.sequence_parallel);
  EXPECT_EQ(mp.layout, "dp,tp,pp");
}

TEST(Options, MistakesInOurWords) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--layres", "3"}, "unknown option '--layres'"},
      {{"--layres=3"}, "unknown option '--layres'"},
      {{"--"}, "unknown option '--'"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"-x"}, "unexpected argument '-x'"},
      {{"-hx"}, "unexpected argument '-hx'"},
      {{"--steps", "3", "stray"}, "unexpected argument 'stray'"},
      {{"--data"}, "option '--data' needs a value (FILES)"},
      {{"--steps", "3", "--batch"}, "option '--batch' needs a value (N)"},
      {{"--help=1"}, "option '--help' takes no value"},
      {{"--layers", "0"}, "--layers needs a whole number from 1 to 1024, got '0'"},
      {{"--layers", "-1"}, "--layers needs a whole number from 1 to 1024, got '-1'"},
      {{"--zero", "4"}, "--zero needs a whole number from 0 to 3, got '4'"},
      {{"--recompute", "all"}, "--recompute needs none or block, got 'all'"},
      {{"--vocab", "65537"}, "--vocab needs a whole number from 1 to 65536, got '65537'"},
      {{"--prefetch", "-1"}, "--prefetch needs a whole number from 0 to 1024, got '-1'"},
      {{"--lr", "nan"}, "--lr needs a number from 0 to 10, got 'nan'"},
      {{"--clip", "1e10"}, "--clip needs a number from 0 to 1e+09, got '1e10'"},
      {{"--bucket-mb", "0"}, "--bucket-mb needs a number from 1e-06 to 1e+06, got '0'"},
      {{"--data", "--steps"}, ""},  // a value may look like an option
      {{"--steps", "0", "--layres", "3"}, "--steps needs a whole number from 1 to 1000000000, got '0'"},
      {{"--layres", "3", "--steps", "0"}, "unknown option '--layres'"},
      {{"--help", "--layres"}, "unknown option '--layres'"},
      {{"--schedule", "zigzag"}, "--schedule needs gpipe, 1f1b or interleaved, got 'zigzag'"},
      {{"--layout", "tp,dp"}, "--layout needs tp, pp and dp once each, innermost first (e.g. tp,pp,dp), got 'tp,dp'"},
      {{"--sequence-parallel=1"}, "option '--sequence-parallel' takes no value"},
      {{"--tp", "0"}, "--tp needs a whole number from 1 to 65536, got '0'"},
  };
  for (const auto& [args, message] : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(error_of(args), message) << joined;
  }
}

// --device and --precision: the values, and what a device cannot do yet.
TEST(Options, DeviceValuesAndMistakes) {
  Options o = parse({"--device", "emulated", "--precision", "fp32"});
  validate_options(o, 1, false, default_device);
  EXPECT_EQ(o.device, "emulated");
  Options d = parse({});
  validate_options(d, 1, false, default_device);
  EXPECT_TRUE(d.device == "host" || d.device == "cuda") << d.device;  // cuda only where a GPU is
  Options asked = parse({});  // the default is the caller's, asked for only when --device is not given
  validate_options(asked, 1, false, [] { return std::string("emulated"); });
  EXPECT_EQ(asked.device, "emulated");
  Options given = parse({"--device", "host"});
  validate_options(given, 1, false, []() -> std::string {
    ADD_FAILURE() << "the default device was asked for with --device given";
    return "";
  });
  EXPECT_EQ(given.device, "host");
  EXPECT_EQ(error_of({"--device", "tpu"}), "--device needs host, emulated or cuda, got 'tpu'");
  EXPECT_EQ(error_of({"--precision", "fp16"}), "--precision needs fp32 or bf16, got 'fp16'");
  EXPECT_EQ(error_of({"--grad-dtype", "fp16"}), "--grad-dtype needs fp32 or bf16, got 'fp16'");
  EXPECT_EQ(parse({"--grad-dtype", "bf16"}).grad_dtype, "bf16");
  const std::vector<std::pair<std::vector<std::string>, std::string>> invalid = {
      {{"--device", "emulated", "--precision", "bf16"}, "--precision bf16 needs --device cuda"},
      {{"--device", "host", "--precision", "bf16"}, "--precision bf16 needs --device cuda"},
      {{"--device", "emulated", "--dp", "4", "--on-failure", "shrink"},
       "--device emulated with --on-failure shrink: going on after a failure is not implemented on a device"},
  };
  for (const auto& [args, message] : invalid) {
    Options x = parse(args);
    std::string got;
    try {
      validate_options(x, args.size() > 2 && args[2] == "--dp" ? 4 : 1, true, default_device);
    } catch (const TrainError& e) {
      got = e.what();
    }
    EXPECT_NE(got.find(message), std::string::npos) << got << " | expected: " << message;
  }
}

// ZeRO-3, recomputation, token shards: the values, and --prefetch only with --zero 3.
TEST(Options, ZeroThreeRecomputeAndShards) {
  Options o = parse(
      {"--zero", "3", "--recompute", "block", "--vocab", "50257", "--data", "a.bin,b.bin", "--val-data", "c.bin"});
  validate_options(o, 1, false, default_device);
  EXPECT_EQ(o.zero, 3);
  EXPECT_EQ(o.prefetch, 1);  // the default
  EXPECT_TRUE(o.recompute);
  EXPECT_EQ(o.model.vocab, 50257);
  EXPECT_EQ(o.data, "a.bin,b.bin");
  EXPECT_EQ(o.val_data, "c.bin");
  Options p = parse({"--zero", "3", "--prefetch", "0"});
  validate_options(p, 1, false, default_device);
  EXPECT_EQ(p.prefetch, 0);
  validate_options(p, 1, false, default_device);  // again, as a shrink does
  EXPECT_FALSE(parse({"--recompute", "none"}).recompute);
  Options bad = parse({"--zero", "2", "--prefetch", "2"});
  try {
    validate_options(bad, 1, false, default_device);
    ADD_FAILURE() << "--prefetch without --zero 3 was taken";
  } catch (const TrainError& e) {
    EXPECT_EQ(std::string(e.what()), "--prefetch is for --zero 3 (layers gathered ahead)");
  }
  Options plain = parse({"--zero", "1"});
  validate_options(plain, 1, false, default_device);
  validate_options(plain, 1, false, default_device);
}

TEST(Options, DilocoValuesAndMistakes) {
  Options o = parse({"--diloco-h", "50", "--islands", "2", "--outer-lr", "0.5", "--outer-momentum", "0.8",
                     "--outer-dtype", "fp4", "--fragments", "4", "--overlap", "1", "--mix", "0.25"});
  validate_options(o, 4, true, default_device);
  EXPECT_EQ(o.diloco_h, 50);
  EXPECT_EQ(o.outer.every, 50);
  EXPECT_EQ(o.outer.islands, 2);
  EXPECT_FLOAT_EQ(o.outer.lr, 0.5f);
  EXPECT_FLOAT_EQ(o.outer.momentum, 0.8f);
  EXPECT_EQ(o.outer.format, strata::WireFormat::fp4);
  EXPECT_EQ(o.outer.fragments, 4);
  EXPECT_EQ(o.outer.overlap, 1);
  EXPECT_FLOAT_EQ(o.outer.mix, 0.25f);
  Options d = parse({"--diloco-h", "10", "--islands", "2"});
  EXPECT_FLOAT_EQ(d.outer.lr, strata::OuterSyncConfig().lr);  // the library's defaults
  EXPECT_FLOAT_EQ(d.outer.momentum, strata::OuterSyncConfig().momentum);
  EXPECT_EQ(d.outer.format, strata::WireFormat::fp32);

  EXPECT_EQ(error_of({"--outer-dtype", "fp8"}), "--outer-dtype needs fp32, bf16, int8 or fp4, got 'fp8'");
  EXPECT_EQ(error_of({"--mix", "2"}), "--mix needs a number from 0 to 1, got '2'");
  const std::vector<std::pair<std::vector<std::string>, std::string>> invalid = {
      {{"--outer-lr", "0.5"}, "--outer-lr is a DiLoCo option: it needs --diloco-h H"},
      {{"--diloco-h", "10"}, "--diloco-h needs --islands K"},
      {{"--diloco-h", "10", "--islands", "3"}, "--islands 3 does not divide the 4 ranks into equal islands"},
      {{"--diloco-h", "10", "--islands", "2", "--fragments", "7"}, "--fragments 7 but the model has 6 layer groups"},
      {{"--diloco-h", "3", "--islands", "2", "--fragments", "4"}, "--fragments 4 is more than --diloco-h 3"},
      {{"--diloco-h", "10", "--islands", "2", "--overlap", "10"}, "--overlap 10 must be below --diloco-h 10"},
      {{"--tp", "2", "--diloco-h", "10", "--islands", "4"}, "--islands 4 does not divide --dp 2"},
      {{"--on-failure", "continue"}, "--on-failure continue is for DiLoCo's islands"},
  };
  for (const auto& [args, message] : invalid) {
    Options x = parse(args);
    std::string got;
    try {
      validate_options(x, 4, true, default_device);
    } catch (const TrainError& e) {
      got = e.what();
    }
    EXPECT_NE(got.find(message), std::string::npos) << got << " | expected: " << message;
  }
  Options alone = parse({"--diloco-h", "10", "--islands", "1"});
  EXPECT_THROW(validate_options(alone, 1, false, default_device), TrainError);  // needs a launcher
}

TEST(Options, UsageListsEveryFlag) {
  const std::string u = usage_text();
  EXPECT_EQ(u.rfind("usage: strata-train [options]\n", 0), 0u) << u;
  for (const char* line : {"  --data FILES        text file, or llm.c uint16 token shards (.bin), comma-separated, "
                           "to train on (default data/tinyshakespeare.txt); the last tenth is the validation split "
                           "unless --val-data\n",
                           "  --zero 0|1|2|3      0: all-reduce; 1: shard optimizer state; 2: also shard gradients; "
                           "3: also shard parameters, gathered per layer as used (default 0)\n",
                           "  --recompute none|block\n                      block: keep only each transformer block's "
                           "input and compute its forward again in backward (default none)\n",
                           "  --help              print this help\n"})
    EXPECT_NE(u.find(line), std::string::npos) << line << u;
}

}  // namespace
}  // namespace strata::train
