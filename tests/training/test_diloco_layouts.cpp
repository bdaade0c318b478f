// strata-train --diloco-h with tensor and pipeline parallelism (and ZeRO) inside each
// island, against the reference the issue names: DiLoCo with the same islands, H, data and
// seed and one unsplit model per island, run in the same test. Splitting the model inside
// an island changes only the order of reductions, so the 20 losses and the validation
// losses must agree within 1e-5 relative; the islands' replicas must be bit-identical
// after every outer step (their checkpoints at an outer step's boundary); and a run
// stopped at an outer step and resumed must continue the uninterrupted one bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "train_proc.hpp"

using train_test::plus;
using train_test::rel_diff;
using train_test::run_train;
using train_test::TrainRun;
namespace st = strata::train;

namespace {

using train_test::kLossRel;

// 4 layers (2 per pipeline stage), 4 heads of 8, ctx 16; 8 sequences, 4 per island.
std::vector<std::string> args(int h, const std::vector<std::string>& more) {
  return plus({"--data", STRATA_DATA_PATH, "--layers", "4", "--heads", "4", "--dim", "32", "--ctx", "16", "--batch", "8",
               "--steps", "20", "--warmup", "5", "--lr", "3e-3", "--eval-every", "10", "--eval-batches", "2",
               "--sample-len", "0", "--bucket-mb", "0.01", "--threads", "1", "--diloco-h", std::to_string(h),
               "--islands", "2"},
              more);
}

using train_test::TempDir;

// The parameters of island k's checkpoint in DIR, as bytes.
std::string island_params(const std::string& dir, int k) {
  st::CheckpointReader r(dir + "/island-" + std::to_string(k));
  std::vector<float> p(r.header().num_params);
  r.read(st::Section::params, 0, p.size(), p.data());
  return std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float));
}

void expect_islands_identical(const std::string& dir, const std::string& when) {
  EXPECT_EQ(island_params(dir, 0), island_params(dir, 1)) << "the islands' replicas differ " << when;
}

// The unsplit reference: two islands of one rank each, per H and extra flags.
const TrainRun& unsplit(int h, const std::string& extra) {
  static std::map<std::string, TrainRun> cache;
  const std::string key = std::to_string(h) + extra;
  auto [it, fresh] = cache.try_emplace(key);
  if (fresh) it->second = run_train(2, args(h, train_test::split_words(extra)));
  return it->second;
}

double expect_same_curve(const TrainRun& r, const TrainRun& ref) {
  double worst = 0;
  EXPECT_EQ(r.loss.size(), ref.loss.size()) << r.describe();
  for (const auto& [step, loss] : ref.loss) {
    if (!r.loss.count(step)) {
      ADD_FAILURE() << "no loss for step " << step << "\n" << r.describe();
      continue;
    }
    worst = std::max(worst, rel_diff(r.loss.at(step), loss));
    EXPECT_LE(rel_diff(r.loss.at(step), loss), kLossRel) << "step " << step << ": " << r.loss.at(step) << " vs unsplit " << loss;
  }
  for (const auto& [step, loss] : ref.val_loss) {
    if (!r.val_loss.count(step)) {
      ADD_FAILURE() << "no validation at step " << step;
      continue;
    }
    worst = std::max(worst, rel_diff(r.val_loss.at(step), loss));
    EXPECT_LE(rel_diff(r.val_loss.at(step), loss), kLossRel) << "validation at step " << step;
  }
  return worst;
}

struct Case {
  std::string name;
  int ranks;
  std::string flags;
  int h;
  bool resume = false;         // also stopped at step 10 and resumed
  std::string both = "";       // flags the unsplit reference takes too
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

class DilocoLayouts : public ::testing::TestWithParam<Case> {};

TEST_P(DilocoLayouts, SplitIslandsEqualUnsplitOnes) {
  const Case& c = GetParam();
  const TrainRun& ref = unsplit(c.h, c.both);
  ASSERT_TRUE(ref.ok()) << ref.describe();
  const std::vector<std::string> flags = plus(train_test::split_words(c.flags), train_test::split_words(c.both));
  TempDir end("diloco-layouts");
  TrainRun full = run_train(c.ranks, plus(args(c.h, flags), {"--save", end.path}), 120);
  ASSERT_TRUE(full.ok()) << full.describe();
  const double worst = expect_same_curve(full, ref);
  // Step 20 is an outer step's boundary; a streamed fragment is applied τ steps after it.
  if (c.both.empty()) expect_islands_identical(end.path, "at step 20");
  ASSERT_EQ(static_cast<int>(full.checksums.size()), c.ranks) << full.describe();
  for (const auto& a : full.ranks)
    for (const auto& b : full.ranks) {
      if (a.tp == b.tp && a.pp == b.pp) {
        EXPECT_EQ(a.checksum, b.checksum) << "ranks of shard tp " << a.tp << " pp " << a.pp;
      }
    }
  std::cout << c.name << " (" << c.flags << " " << c.both << ", H " << c.h << "): 20 losses and "
            << ref.val_loss.size() << " validations worst relative " << worst << " from the unsplit islands"
            << (c.both.empty() ? "; island replicas bit-identical at step 20" : "") << "\n";
  if (!c.resume) return;

  // Stopped at the outer step of step 10 and resumed: the uninterrupted run, bit for bit.
  TempDir mid("diloco-layouts"), again("diloco-layouts");
  TrainRun first = run_train(c.ranks, plus(args(c.h, flags), {"--stop-at", "10", "--save", mid.path}), 120);
  ASSERT_TRUE(first.ok()) << first.describe();
  expect_islands_identical(mid.path, "at step 10");
  TrainRun second = run_train(c.ranks, plus(args(c.h, flags), {"--resume", mid.path, "--save", again.path}), 120);
  ASSERT_TRUE(second.ok()) << second.describe();
  train_test::expect_resumed_bitwise(first, second, full, 10);
  auto sorted = [](std::vector<std::string> v) {  // the ranks' lines arrive in any order
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(second.checksums), sorted(full.checksums)) << "final parameters differ from the uninterrupted run";
  expect_islands_identical(again.path, "at step 20 after resuming");
  std::cout << "  stopped at 10 and resumed: losses 11-20 and every rank's parameters bitwise equal\n";
}

INSTANTIATE_TEST_SUITE_P(
    Diloco, DilocoLayouts,
    ::testing::Values(Case{"tp2_H1", 4, "--tp 2", 1}, Case{"pp2_1f1b_H1", 4, "--pp 2 --microbatches 4 --schedule 1f1b", 1},
                      Case{"tp2_pp2_H1", 8, "--tp 2 --pp 2 --microbatches 4", 1},
                      Case{"tp2_H10", 4, "--tp 2", 10, true},
                      Case{"pp2_1f1b_H10", 4, "--pp 2 --microbatches 4 --schedule 1f1b", 10, true},
                      Case{"tp2_pp2_H10", 8, "--tp 2 --pp 2 --microbatches 4", 10, true},
                      Case{"pp2_dp2_zero2_H10", 8, "--pp 2 --dp 4 --zero 2 --microbatches 2", 10},
                      // ZeRO-3: each data-parallel rank of an island its own shard, synced with
                      // the rank holding the same shard in the other island.
                      Case{"dp2_zero3_H10", 4, "--dp 4 --zero 3", 10, true},
                      // Streaming: fragment p is the same layer group on both stages as in the whole
                      // model, so each stage has fragments it holds nothing of (not exchanged).
                      Case{"pp2_streaming_H10", 4, "--pp 2 --microbatches 4", 10, false,
                           "--fragments 6 --overlap 2 --mix 0.25"}),
    [](const auto& info) { return info.param.name; });

// The first stage's embedding and the last stage's copy of it (the tied head) go through
// separate outer syncs; with a block-scaled format and streaming they must still be
// quantised alike (training/diloco.hpp says why), so the copies stay equal. Here the
// embedding straddles the boundary of two pieces, which lies elsewhere on each stage.
TEST(DilocoLayouts, TiedEmbeddingStaysTiedUnderBlockFormats) {
  TrainRun r = run_train(8, args(4, {"--layers", "2", "--pp", "2", "--dp", "4", "--microbatches", "2", "--outer-dtype",
                                     "fp4", "--fragments", "2", "--overlap", "1"}));
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(r.ranks.size(), 8u) << r.describe();
  int pairs = 0;
  for (const auto& a : r.ranks)
    for (const auto& b : r.ranks)
      if (a.pp == 0 && b.pp == 1 && a.tp == b.tp) {
        ASSERT_FALSE(a.tied.empty() || b.tied.empty()) << r.describe();
        EXPECT_EQ(a.tied, b.tied) << "the two copies of the tied embedding differ";
        ++pairs;
      }
  EXPECT_EQ(pairs, 16);  // four ranks per stage: two in each island
  std::cout << "pp 2, fp4 streaming between islands: first and last stage hold the same embedding (" << r.ranks[0].tied << ")\n";
}

}  // namespace
