// End-to-end runs of strata-train: data parallel and ZeRO runs against the serial golden
// losses, checkpoint/resume against an uninterrupted run, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "train_proc.hpp"

using train_test::plus;
using train_test::rel_diff;
using train_test::run_train;
using train_test::TrainRun;

namespace {

// Tiny and fast, but with awkward sizes: dim 27 and 3 heads give buckets of odd length,
// so dp=2 and dp=4 need padding (26028 parameters; the run prints "26030 padded" for dp=2
// and "26036 padded" for dp=4).
std::vector<std::string> base_args(int steps) {
  return {"--data",         STRATA_DATA_PATH,
          "--layers",       "2",
          "--heads",        "3",
          "--dim",          "27",
          "--ctx",          "32",
          "--batch",        "8",
          "--steps",        std::to_string(steps),
          "--warmup",       "5",
          "--lr",           "3e-3",
          "--eval-every",   "10",
          "--eval-batches", "2",
          "--sample-len",   "0",
          "--bucket-mb",    "0.02",
          "--threads",      "1"};
}

void expect_same_checksum_on_every_rank(const TrainRun& r, int ranks) {
  ASSERT_EQ(static_cast<int>(r.checksums.size()), std::max(ranks, 1)) << r.describe();
  for (const auto& c : r.checksums)
    EXPECT_EQ(c, r.checksums[0]) << "ranks disagree\n" << r.describe();
}

const TrainRun& serial_golden() {
  static TrainRun r = run_train(0, base_args(20));
  return r;
}

// ---------------------------------------------------------------------------------------
struct Parallel {
  int dp;
  int zero;
};
std::ostream& operator<<(std::ostream& o, const Parallel& p) {
  return o << "dp" << p.dp << "_zero" << p.zero;
}

class Golden : public ::testing::TestWithParam<Parallel> {};

// Same global batch, same seed: the losses of 20 steps match the serial fp32 run to a
// relative 1e-4 (summation order differs, so not bitwise), and every rank ends with
// bit-identical parameters.
TEST_P(Golden, MatchesSerialLosses) {
  const Parallel p = GetParam();
  const TrainRun& s = serial_golden();
  ASSERT_TRUE(s.ok()) << s.describe();
  ASSERT_EQ(s.loss.size(), 20u) << s.describe();
  TrainRun r = run_train(
      p.dp, plus(base_args(20), {"--dp", std::to_string(p.dp), "--zero", std::to_string(p.zero)}));
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(r.loss.size(), 20u) << r.describe();
  ASSERT_NE(r.proc.out.find(p.dp == 2 ? "(26030 padded" : "(26036 padded"), std::string::npos)
      << "expected padded shards\n"
      << r.describe();
  double worst = 0;
  for (auto& [step, loss] : s.loss) {
    ASSERT_TRUE(r.loss.count(step)) << "no loss for step " << step;
    double d = rel_diff(r.loss.at(step), loss);
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-4) << "step " << step << ": " << r.loss.at(step) << " vs serial " << loss;
  }
  for (auto& [step, loss] : s.val_loss)
    EXPECT_LE(rel_diff(r.val_loss[step], loss), 1e-4) << "val step " << step;
  expect_same_checksum_on_every_rank(r, p.dp);
  std::cout << "dp " << p.dp << " zero " << p.zero << ": 20 losses vs serial, worst relative "
            << worst << " (step 20: " << r.loss.rbegin()->second << " vs "
            << s.loss.rbegin()->second << "); " << r.checksums.size()
            << " ranks, parameter checksum " << r.checksums[0] << "\n";
}

INSTANTIATE_TEST_SUITE_P(Training, Golden,
                         ::testing::Values(Parallel{2, 0}, Parallel{2, 1}, Parallel{2, 2},
                                           Parallel{4, 0}, Parallel{4, 1}, Parallel{4, 2}),
                         [](const auto& info) {
                           return "dp" + std::to_string(info.param.dp) + "_zero" +
                                  std::to_string(info.param.zero);
                         });

// ---------------------------------------------------------------------------------------
// Stop at step 10 with --save, resume to 20: losses 11..20 and the final parameters are
// bitwise those of the uninterrupted run (same data order, same moments, same step count).
class Resume : public ::testing::TestWithParam<Parallel> {};

TEST_P(Resume, MatchesUninterruptedRun) {
  const Parallel p = GetParam();
  const int ranks = p.dp == 1 ? 0 : p.dp;
  std::vector<std::string> mode = {"--zero", std::to_string(p.zero)};
  std::string dir = train_test::make_temp_dir("resume");
  ASSERT_FALSE(dir.empty());
  TrainRun full =
      p.dp == 1 && p.zero == 0 ? serial_golden() : run_train(ranks, plus(base_args(20), mode));
  ASSERT_TRUE(full.ok()) << full.describe();
  TrainRun first =
      run_train(ranks, plus(base_args(20), plus(mode, {"--stop-at", "10", "--save", dir})));
  ASSERT_TRUE(first.ok()) << first.describe();
  EXPECT_EQ(first.loss.size(), 10u);
  auto files = train_test::snapshot(dir);
  ASSERT_EQ(files.size(), 1u) << "expected only checkpoint.bin (no temporary file left)";
  ASSERT_TRUE(files.count("checkpoint.bin"));
  TrainRun second = run_train(ranks, plus(base_args(20), plus(mode, {"--resume", dir})));
  ASSERT_TRUE(second.ok()) << second.describe();
  ASSERT_EQ(second.loss.size(), 10u) << second.describe();
  EXPECT_EQ(second.loss.begin()->first, 11);
  for (int step = 1; step <= 20; ++step) {
    const TrainRun& part = step <= 10 ? first : second;
    ASSERT_TRUE(part.loss.count(step)) << "step " << step;
    EXPECT_EQ(part.loss.at(step), full.loss.at(step)) << "step " << step;
  }
  EXPECT_EQ(second.val_loss[20], full.val_loss[20]);
  expect_same_checksum_on_every_rank(second, ranks);
  EXPECT_EQ(second.checksums[0], full.checksums[0])
      << "final parameters differ from the uninterrupted run";
  std::cout << "dp " << p.dp << " zero " << p.zero << ": stopped at 10, resumed to 20; losses "
            << "11..20 and parameters bitwise equal to the uninterrupted run (step 20 loss "
            << second.loss.at(20) << ", checksum " << second.checksums[0] << ")\n";
  train_test::remove_tree(dir);
}

INSTANTIATE_TEST_SUITE_P(Training, Resume,
                         ::testing::Values(Parallel{1, 0}, Parallel{2, 1}, Parallel{4, 2}),
                         [](const auto& info) {
                           return "dp" + std::to_string(info.param.dp) + "_zero" +
                                  std::to_string(info.param.zero);
                         });

// A checkpoint holds canonical (unsharded, unpadded) tensors, so one written by dp=4
// zero=2 resumes in a single process; the curve then matches to rounding.
TEST(Resume, ShardedCheckpointResumesSerially) {
  std::string dir = train_test::make_temp_dir("portable");
  TrainRun first =
      run_train(4, plus(base_args(20), {"--zero", "2", "--stop-at", "10", "--save", dir}));
  ASSERT_TRUE(first.ok()) << first.describe();
  TrainRun second = run_train(0, plus(base_args(20), {"--resume", dir}));
  ASSERT_TRUE(second.ok()) << second.describe();
  const TrainRun& s = serial_golden();
  for (int step = 11; step <= 20; ++step)
    EXPECT_LE(rel_diff(second.loss[step], s.loss.at(step)), 1e-4) << "step " << step;
  train_test::remove_tree(dir);
}

// ---------------------------------------------------------------------------------------
// Bad input: a clear message, a non-zero exit, and the checkpoint directory untouched.
class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = train_test::make_temp_dir("bad");
    ASSERT_FALSE(dir_.empty());
    // A valid checkpoint to protect (and to corrupt in some tests).
    TrainRun r = run_train(0, plus(base_args(4), {"--stop-at", "2", "--save", dir_}));
    ASSERT_TRUE(r.ok()) << r.describe();
    before_ = train_test::snapshot(dir_);
    ASSERT_EQ(before_.size(), 1u);
  }
  void TearDown() override { train_test::remove_tree(dir_); }

  // Runs with --save dir_ appended and checks failure, message and an unchanged dir_.
  void expect_rejected(int ranks, std::vector<std::string> args, const std::string& message) {
    args = plus(args, {"--save", dir_});
    TrainRun r = run_train(ranks, args, 60);
    EXPECT_TRUE(r.proc.exited && r.proc.exit_code != 0) << r.describe();
    EXPECT_FALSE(r.proc.killed_by_deadline) << r.describe();
    EXPECT_NE(r.proc.out.find(message), std::string::npos)
        << "expected message containing: " << message << "\n"
        << r.describe();
    EXPECT_TRUE(r.loss.empty()) << "no training step may run\n" << r.describe();
    EXPECT_TRUE(train_test::snapshot(dir_) == before_) << "checkpoint dir changed";
    for (auto& line : strata_test::lines_containing(r.proc.out, "error:"))
      std::cout << line << "\n";
  }
  std::vector<std::string> with(std::vector<std::string> replace) {
    std::vector<std::string> a = base_args(4);
    for (size_t i = 0; i + 1 < replace.size(); i += 2)
      for (size_t j = 0; j + 1 < a.size(); ++j)
        if (a[j] == replace[i]) a[j + 1] = replace[i + 1];
    return a;
  }
  std::string ckpt() const { return dir_ + "/checkpoint.bin"; }
  void flip_byte(size_t offset) {
    std::string data = train_test::read_file(ckpt());
    ASSERT_LT(offset, data.size());
    data[offset] ^= 0x20;
    train_test::write_file(ckpt(), data);
    before_ = train_test::snapshot(dir_);
  }

  std::string dir_;
  std::map<std::string, std::string> before_;
};

TEST_F(BadInput, MissingDataFile) {
  expect_rejected(0, with({"--data", "/nonexistent/input.txt"}),
                  "cannot read data file '/nonexistent/input.txt': No such file or directory");
}

TEST_F(BadInput, EmptyDataFile) {
  std::string empty = dir_ + "-empty.txt";
  train_test::write_file(empty, "");
  expect_rejected(0, with({"--data", empty}), "is empty");
  std::remove(empty.c_str());
}

TEST_F(BadInput, BatchNotDivisibleByDp) {
  expect_rejected(2, with({"--batch", "7"}),
                  "--batch 7 does not divide evenly over 2 data-parallel ranks");
}

TEST_F(BadInput, DpWithoutLauncher) {
  expect_rejected(0, plus(base_args(4), {"--dp", "2"}), "--dp 2 needs that many ranks");
}

TEST_F(BadInput, ContextLongerThanData) {
  std::string small = dir_ + "-small.txt";
  train_test::write_file(small, std::string(200, 'a'));  // validation split: 20 bytes
  expect_rejected(0, with({"--data", small}), "each split needs at least 33 bytes");
  std::remove(small.c_str());
}

TEST_F(BadInput, CorruptCheckpointPayload) {
  flip_byte(128 + 1000);
  expect_rejected(0, plus(base_args(4), {"--resume", dir_}), "payload checksum mismatch");
}

TEST_F(BadInput, CorruptCheckpointHeader) {
  flip_byte(60);  // inside the step / RNG fields
  expect_rejected(0, plus(base_args(4), {"--resume", dir_}), "header checksum mismatch");
}

TEST_F(BadInput, TruncatedCheckpoint) {
  std::string data = train_test::read_file(ckpt());
  train_test::write_file(ckpt(), data.substr(0, data.size() - 4));
  before_ = train_test::snapshot(dir_);
  expect_rejected(0, plus(base_args(4), {"--resume", dir_}), "truncated or extended");
}

TEST_F(BadInput, CheckpointOfAnotherModel) {
  expect_rejected(0, plus(with({"--dim", "30"}), {"--resume", dir_}),
                  "checkpoint is for a different model");
}

TEST_F(BadInput, CorruptCheckpointUnderLauncher) {
  flip_byte(128 + 5);
  expect_rejected(2, plus(base_args(4), {"--resume", dir_}), "payload checksum mismatch");
}

TEST_F(BadInput, UnknownFlag) {
  expect_rejected(0, plus(base_args(4), {"--layres", "3"}), "unknown option '--layres'");
}

}  // namespace
