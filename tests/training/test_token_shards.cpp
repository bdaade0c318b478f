// strata-train --data on llm.c token shards (training/data.hpp), written from the text
// file by training/write_shard.py: a byte-level shard of the text trains exactly as the
// text does, split by fraction (one shard) or by shard (--val-data); a shard with a wrong
// header or length, or a token beyond --vocab, is refused naming the file, before anything
// runs or is written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "train_proc.hpp"

using train_test::plus;
using train_test::run_train;
using train_test::TrainRun;

namespace {

std::vector<std::string> args(const std::string& data) {
  return {"--data", data, "--layers", "2", "--heads", "2", "--dim", "24", "--ctx", "16", "--batch", "4",
          "--steps", "10", "--warmup", "4", "--lr", "3e-3", "--eval-every", "5", "--eval-batches", "2",
          "--sample-len", "0", "--threads", "1"};
}

// training/write_shard.py TEXT OUT [VAL]
void write_shards(const std::string& out, const std::string& val = "") {
  const std::string cmd = std::string("python3 ") + STRATA_WRITE_SHARD_PY + " " + STRATA_DATA_PATH + " " + out + " " + val;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

const TrainRun& text_run() {
  static const TrainRun r = run_train(0, args(STRATA_DATA_PATH));
  return r;
}

void expect_text_losses(const TrainRun& r) {
  const TrainRun& t = text_run();
  ASSERT_TRUE(t.ok()) << t.describe();
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.loss, t.loss) << "training losses differ from the text file's";
  EXPECT_EQ(r.val_loss, t.val_loss) << "validation losses differ from the text file's";
  EXPECT_EQ(r.checksums, t.checksums) << "final parameters differ from the text file's";
  EXPECT_EQ(r.loss.size(), 10u);
}

TEST(TokenShards, AByteLevelShardTrainsAsItsText) {
  train_test::TempDir dir("shards");
  const std::string shard = dir.path + "/text.bin";
  write_shards(shard);
  const TrainRun r = run_train(0, args(shard));
  expect_text_losses(r);
  EXPECT_NE(r.proc.out.find("1115394 tokens (train 1003855, val 111539)"), std::string::npos) << r.describe();
  std::cout << "one shard of tinyshakespeare's bytes: 10 losses, 2 validations and the parameters equal the text "
               "file's\n";
}

TEST(TokenShards, SplitByShardAsTheTextSplitsByFraction) {
  train_test::TempDir dir("shards");
  const std::string train = dir.path + "/train.bin", val = dir.path + "/val.bin";
  write_shards(train, val);
  const TrainRun r = run_train(0, plus(args(train), {"--val-data", val}));
  expect_text_losses(r);
  // Two shards read back to back are the text too: its training split cut in two.
  std::cout << "--data train.bin --val-data val.bin: the text file's losses\n";
}

// A larger vocabulary than the tokens need trains (the head has more rows) and samples
// token ids; tokens beyond it are refused.
TEST(TokenShards, VocabularyAboveTheBytes) {
  train_test::TempDir dir("shards");
  const std::string shard = dir.path + "/text.bin";
  write_shards(shard);
  TrainRun r = run_train(0, {"--data", shard, "--vocab", "300", "--layers", "1", "--heads", "2", "--dim", "24",
                             "--ctx", "16", "--batch", "2", "--steps", "2", "--eval-batches", "0", "--sample-len",
                             "5", "--threads", "1"});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_NE(r.proc.out.find("vocab 300"), std::string::npos) << r.describe();
  EXPECT_NE(r.proc.out.find("sample (5 token ids):"), std::string::npos) << r.describe();
}

// Each wrong shard: the message names the file and what is wrong; exit 1, no step, nothing
// written.
TEST(TokenShards, WrongShardsAreRefused) {
  train_test::TempDir dir("shards");
  const std::string good = dir.path + "/good.bin";
  write_shards(good);
  const std::string bytes = train_test::read_file(good);
  auto with_int = [&](size_t index, int32_t v) {
    std::string b = bytes;
    std::memcpy(b.data() + 4 * index, &v, 4);
    return b;
  };
  struct Bad {
    std::string name, contents, message;
    std::vector<std::string> flags = {};
  };
  const std::vector<Bad> cases = {
      {"magic.bin", with_int(0, 20240521), "has magic 20240521, not llm.c's 20240520"},
      {"version.bin", with_int(1, 2), "is version 2; this reads version 1 (uint16 tokens)"},
      {"count.bin", with_int(2, 1115395),
       "its header says 1115395 tokens, but the file has 2230788 bytes after the header (1115394 tokens)"},
      {"odd.bin", bytes + "x", "but the file has 2230789 bytes after the header (1115394 tokens and a half)"},
      {"short.bin", bytes.substr(0, 1000), "is 1000 bytes, shorter than its 1024-byte header"},
      {"vocab.bin", bytes, "is not below --vocab 100", {"--vocab", "100"}},
  };
  for (const Bad& c : cases) {
    const std::string path = dir.path + "/" + c.name;
    train_test::write_file(path, c.contents);
    train_test::TempDir out("shards-out");
    TrainRun r = run_train(0, plus(plus(args(path), c.flags), {"--save", out.path}));
    EXPECT_TRUE(r.proc.exited && r.proc.exit_code == 1) << r.describe();
    EXPECT_NE(r.proc.out.find("strata-train: error: "), std::string::npos) << r.describe();
    EXPECT_NE(r.proc.out.find("'" + path + "'"), std::string::npos) << "the message names no file\n" << r.describe();
    EXPECT_NE(r.proc.out.find(c.message), std::string::npos) << "expected: " << c.message << "\n" << r.describe();
    EXPECT_TRUE(r.loss.empty());
    EXPECT_TRUE(train_test::snapshot(out.path).empty()) << "something was written";
    for (auto& l : strata_test::lines_containing(r.proc.out, "error:")) std::cout << l << "\n";
  }
}

}  // namespace
