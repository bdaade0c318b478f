// strata-train --recompute block: backward computes each block's forward again from the
// block's input, which is all forward keeps of it. The same kernels on the same inputs,
// and the same collectives, give the same values: every layout must print the losses of
// --recompute none and end on its parameters, bit for bit, on the host. And the
// activations kept per microbatch must shrink as the memory report's formula says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "train_proc.hpp"

using train_test::plus;
using train_test::run_train;
using train_test::TrainRun;

namespace {

std::vector<std::string> args() {
  return {"--data", STRATA_DATA_PATH, "--layers", "4", "--heads", "4", "--dim", "32", "--ctx", "16", "--batch", "8",
          "--steps", "10", "--warmup", "4", "--lr", "3e-3", "--eval-every", "5", "--eval-batches", "2",
          "--sample-len", "0", "--bucket-mb", "0.01", "--threads", "1"};
}

// The memory report's "activations" (per microbatch) and "recomputation" rows, in MB.
double report_row(const std::string& out, const std::string& row) {
  const size_t at = out.find("  " + row + " ");
  if (at == std::string::npos) return -1;
  double mb = -1;
  std::sscanf(out.c_str() + at + 2 + row.size(), " %lf MB", &mb);
  return mb;
}

struct Case {
  std::string name;
  int ranks;
  std::string flags;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

class Recompute : public ::testing::TestWithParam<Case> {};

TEST_P(Recompute, EqualsNoRecomputeBitForBit) {
  const Case& c = GetParam();
  const std::vector<std::string> base = plus(args(), train_test::split_words(c.flags));
  const TrainRun none = run_train(c.ranks, base);
  ASSERT_TRUE(none.ok()) << none.describe();
  const TrainRun block = run_train(c.ranks, plus(base, {"--recompute", "block"}));
  ASSERT_TRUE(block.ok()) << block.describe();
  ASSERT_EQ(block.loss.size(), 10u) << block.describe();
  EXPECT_EQ(block.loss, none.loss);
  EXPECT_EQ(block.val_loss, none.val_loss);
  std::vector<std::string> a = none.checksums, b = block.checksums;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b) << "final parameters differ";
  EXPECT_EQ(block.proc.out.find("(differs)"), std::string::npos) << "traffic differs from its formula\n"
                                                                   << block.describe();
  // 4 blocks keep their input only: the rest of a block's activations exist once, shared.
  const double kept = report_row(block.proc.out, "activations"), all = report_row(none.proc.out, "activations"),
               redo = report_row(block.proc.out, "recomputation");
  EXPECT_GT(kept, 0);
  EXPECT_GT(redo, 0);
  EXPECT_LT(kept + redo, all) << block.describe();
  std::cout << c.name << ": 10 losses, 2 validations and the final parameters bit-identical; activations per "
            << "microbatch " << kept << " MB + " << redo << " MB recomputed, against " << all << " MB\n";
}

INSTANTIATE_TEST_SUITE_P(Layouts, Recompute,
                         ::testing::Values(Case{"serial", 0, ""}, Case{"tp2_sp", 2, "--tp 2 --sequence-parallel"},
                                           Case{"pp2_1f1b", 2, "--pp 2 --microbatches 4 --schedule 1f1b"},
                                           // 2 blocks a chunk: a chunk's recompute buffer is one block's,
                                           // so a chunk of one block would keep no less.
                                           Case{"pp2_interleaved", 2,
                                                "--pp 2 --microbatches 4 --schedule interleaved --virtual-stages 2 "
                                                "--layers 8"},
                                           Case{"diloco_2_islands", 2, "--dp 2 --diloco-h 5 --islands 2"},
                                           Case{"dp2_zero3", 2, "--dp 2 --zero 3"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
