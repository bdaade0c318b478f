#include <gtest/gtest.h>

#include "coll_printer.hpp"
#include "options.hpp"

namespace perf {
namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "strata-perf");
  return parse_options(args);
}

TEST(ParseSize, PlainAndSuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("1k"), 1024u);
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("4g"), 4ull << 30);
  EXPECT_EQ(parse_size("1.5K"), 1536u);
  EXPECT_EQ(parse_size("2KB"), 2048u);
  EXPECT_EQ(parse_size("2KiB"), 2048u);
  EXPECT_EQ(parse_size("100B"), 100u);
}

TEST(ParseSize, RejectsBadInput) {
  for (const char* bad : {"", "K", "-1", "1X", "1KK", "abc", "1 K", "8x", "1e400", " 8", "+8", "1T"})
    EXPECT_FALSE(parse_size(bad).has_value()) << "'" << bad << "'";
}

TEST(ParseOptions, Defaults) {
  ParseResult r = parse({"all_reduce"});
  ASSERT_EQ(r.error, "");
  const Options& o = r.options;
  EXPECT_EQ(o.coll, Coll(Collective::all_reduce));
  EXPECT_EQ(o.min_bytes, 32ull << 20);
  EXPECT_EQ(o.max_bytes, 32ull << 20);
  EXPECT_EQ(o.step_bytes, 1ull << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 5);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::float32});
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::sum});
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.average, Average::avg);
  EXPECT_FALSE(o.blocking);
  EXPECT_TRUE(o.in_place);
}

TEST(ParseOptions, NcclTestsCommandLine) {
  ParseResult r = parse({"reduce_scatter", "-b", "8", "-e", "64M", "-f", "2", "-n", "7", "-w", "3", "-c", "0",
                         "-d", "bfloat16", "-o", "max", "-a", "3", "-z", "1", "--json", "out.json", "-I", "0"});
  ASSERT_EQ(r.error, "");
  const Options& o = r.options;
  EXPECT_EQ(o.coll, Coll(Collective::reduce_scatter));
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 64ull << 20);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 3);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::bfloat16});
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::max});
  EXPECT_EQ(o.average, Average::max);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_FALSE(o.in_place);
}

TEST(ParseOptions, AttachedValuesLongFormsAndAll) {
  ParseResult r = parse({"broadcast", "-b1K", "--maxbytes=1M", "--stepbytes", "4K", "-dall", "-o", "all", "-r", "all"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.min_bytes, 1024u);
  EXPECT_EQ(r.options.max_bytes, 1u << 20);
  EXPECT_EQ(r.options.step_bytes, 4096u);
  EXPECT_EQ(r.options.types.size(), 10u);
  EXPECT_EQ(r.options.ops.size(), 5u);
  EXPECT_EQ(r.options.root, -1);
}

TEST(ParseOptions, CollectiveNames) {
  EXPECT_EQ(parse({"alltoall"}).options.coll, Coll(Collective::all_to_all));
  EXPECT_EQ(parse({"all_to_all"}).options.coll, Coll(Collective::all_to_all));
  EXPECT_EQ(parse({"all_gather_perf"}).options.coll, Coll(Collective::all_gather));
  EXPECT_EQ(parse({"sendrecv"}).options.coll, Coll(P2p::sendrecv));
  EXPECT_EQ(parse({"pipeline"}).options.coll, Coll(P2p::pipeline));
  EXPECT_EQ(parse({"reduce"}).options.coll, Coll(Collective::reduce));
}

TEST(ParseOptions, Help) {
  EXPECT_TRUE(parse({"-h"}).options.help);
  EXPECT_TRUE(parse({"--help"}).options.help);
  EXPECT_TRUE(parse({"all_reduce", "-b", "8", "-h"}).options.help);
  EXPECT_NE(usage("strata-perf").find("-b,--minbytes"), std::string::npos);
}

TEST(ParseOptions, ThreadsPerProcess) {
  EXPECT_EQ(parse({"all_reduce"}).options.threads, 1);
  EXPECT_EQ(parse({"all_reduce", "-t", "4"}).options.threads, 4);
  EXPECT_EQ(parse({"all_reduce", "--nthreads=8"}).options.threads, 8);
}

TEST(ParseOptions, BadFlagsAreErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},                                   // no collective
      {"allreduce_typo"},                   // unknown collective
      {"all_reduce", "-q", "1"},            // unknown flag
      {"all_reduce", "--bogus=1"},          // unknown long flag
      {"all_reduce", "-b"},                 // missing value
      {"all_reduce", "-b", "lots"},         // bad size
      {"all_reduce", "-b", "2M", "-e", "1M"},  // min > max
      {"all_reduce", "-d", "float128"},     // bad type
      {"all_reduce", "-o", "xor"},          // bad op
      {"all_reduce", "-n", "0"},            // no iterations
      {"all_reduce", "-n", "abc"},
      {"all_reduce", "-w", "-1"},
      {"all_reduce", "-a", "4"},
      {"all_reduce", "-f", "0"},
      {"all_reduce", "-z", "2"},
      {"all_reduce", "-I", "2"},
      {"all_reduce", "-r", "-2"},
      {"all_reduce", "-t", "0"},            // threads per process: at least one
      {"all_reduce", "-t", "1025"},
      {"all_reduce", "-g", "2"},            // GPUs per thread: one
      {"all_reduce", "-b", "0", "-e", "8", "-i", "0"},  // would never advance
      {"all_reduce", "stray"},
  };
  for (const auto& args : bad) {
    ParseResult r = parse(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_NE(r.error, "") << joined;
  }
}

TEST(ParseOptions, MessagesSayWhatIsWrongInOurWords) {
  // The first problem on the line is reported, as the hand-written parser did.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"all_reduce", "-q", "1"}, "unknown option '-q'"},
      {{"all_reduce", "--bogus=1"}, "unknown option '--bogus=1'"},
      {{"all_reduce", "--help=1"}, "unknown option '--help=1'"},
      {{"all_reduce", "-hx"}, "unknown option '-hx'"},
      {{"all_reduce", "--"}, "unknown option '--'"},
      {{"all_reduce", "-1"}, "unknown option '-1'"},
      {{"all_reduce", "stray", "-b", "8"}, "unexpected argument 'stray'"},
      {{"all_reduce", "-"}, "unexpected argument '-'"},
      {{"all_reduce", "-b", "8", "-e"}, "option -e/--maxbytes needs a value"},
      {{"all_reduce", "--stepfactor"}, "option -f/--stepfactor needs a value"},
      {{"all_reduce", "-b", "lots"}, "invalid value 'lots' for -b (expected a size such as 8, 1K, 64M, 1G)"},
      {{"all_reduce", "-b", "-e", "8"}, "invalid value '-e' for -b (expected a size such as 8, 1K, 64M, 1G)"},
      {{"all_reduce", "-b=5"}, "invalid value '=5' for -b (expected a size such as 8, 1K, 64M, 1G)"},
      {{"all_reduce", "-w", "-1"}, "invalid value '-1' for -w (expected an integer >= 0)"},
      {{"all_reduce", "-n", "0", "-n", "5"}, "invalid value '0' for -n (expected an integer >= 1)"},
      {{"all_reduce", "-q", "-b", "lots"}, "unknown option '-q'"},
      {{"all_reduce", "-b", "lots", "-q"}, "invalid value 'lots' for -b (expected a size such as 8, 1K, 64M, 1G)"},
      {{"all_reduce", "-q", "-h"}, "unknown option '-q'"},
      {{"all_reduce", "-d", "float128"},
       "invalid value 'float128' for -d (expected int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double "
       "f8e4m3 f8e5m2 or all)"},
      {{"all_reduce", "--op=xor"}, "invalid value 'xor' for -o (expected sum prod max min avg or all)"},
      {{"-b", "8", "all_reduce"},
       "missing the collective: the first word must be one of all_reduce, reduce_scatter, all_gather, broadcast, "
       "reduce, all_to_all, sendrecv, pipeline"},
      {{"allreduce"},
       "unknown collective 'allreduce' (expected all_reduce, reduce_scatter, all_gather, broadcast, reduce, "
       "all_to_all, sendrecv, pipeline)"},
  };
  for (const auto& [args, message] : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(parse(args).error, message) << joined;
  }
}

TEST(ParseOptions, HelpStopsAtTheFlag) {
  EXPECT_TRUE(parse({"all_reduce", "-h", "-q"}).options.help);
  EXPECT_TRUE(parse({"all_reduce", "--help", "-b", "lots"}).options.help);
  EXPECT_EQ(parse({"all_reduce", "-h", "-q"}).error, "");
}

TEST(ParseOptions, LastValueWinsAndTypesFromTheLibrary) {
  ParseResult r = parse({"all_reduce", "-b", "8", "--minbytes", "16", "-d", "u32", "-o", "prod"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.min_bytes, 16u);
  EXPECT_EQ(r.options.types, std::vector<DataType>{DataType::uint32});
  EXPECT_EQ(r.options.ops, std::vector<ReduceOp>{ReduceOp::prod});
  for (const auto& [alias, type] : std::vector<std::pair<std::string, DataType>>{
           {"i8", DataType::int8}, {"u8", DataType::uint8}, {"char", DataType::int8}, {"fp16", DataType::float16},
           {"bf16", DataType::bfloat16}, {"fp64", DataType::float64}, {"half", DataType::float16}}) {
    EXPECT_EQ(parse({"all_reduce", "-d", alias}).options.types, std::vector<DataType>{type}) << alias;
  }
  // -d all: nccl-tests' order.
  EXPECT_EQ(parse({"all_reduce", "-d", "all"}).options.types,
            (std::vector<DataType>{DataType::int8, DataType::uint8, DataType::int32, DataType::uint32,
                                   DataType::int64, DataType::uint64, DataType::float16, DataType::float32,
                                   DataType::float64, DataType::bfloat16}));
}

}  // namespace
}  // namespace perf
