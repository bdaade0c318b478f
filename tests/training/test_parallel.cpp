// Golden runs of model parallelism, in the manner of Megatron-LM's functional tests: the
// serial fp32 run, computed in the same test, is the reference. Every tensor, pipeline
// and data parallel layout, schedule and sequence-parallel setting must give the serial
// run's 20 losses and validation losses (relative 1e-5: only the order of reductions
// differs) and, gathered into a checkpoint, its parameters and Adam moments; the
// replicas that hold the same tensors must agree bit for bit; and the traffic each group
// carried must equal its formula. Then checkpoints across layouts, the layout taken from
// the hierarchy, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "errors.hpp"
#include "train_proc.hpp"

using train_test::plus;
using train_test::rel_diff;
using train_test::run_train;
using train_test::TrainRun;
namespace st = strata::train;

namespace {

using train_test::kLossRel;
// Gathered state: |parallel - serial| <= kAbs + kRel |serial| for every Adam moment and
// for all but one parameter in kFew. Adam divides each gradient by its own running scale,
// so where a gradient is tiny (a hidden unit that is almost never active) the rounding
// of a different reduction order becomes a visible difference in the step: up to lr per
// step where the gradient is all rounding. So no parameter may differ by more than the
// distance Adam can move it in the run, the sum of the learning rates (a larger
// difference is no rounding), and only those few by more than kAbs + kRel |serial|.
constexpr double kAbs = 1e-5, kRel = 1e-4;
constexpr size_t kFew = 10000;

// Small and fast: 6 layers (uneven over 4 stages), 4 heads of 8, ctx 16, 8 sequences.
std::vector<std::string> model_args(int layers) {
  return {"--data",      STRATA_DATA_PATH, "--layers",       std::to_string(layers),
          "--heads",     "4",              "--dim",          "32",
          "--ctx",       "16",             "--batch",        "8",
          "--steps",     "20",             "--warmup",       "5",
          "--lr",        "3e-3",           "--eval-every",   "10",
          "--eval-batches", "2",           "--sample-len",   "0",
          "--bucket-mb", "0.01",           "--threads",      "1"};
}

using train_test::split_words;
using train_test::TempDir;

// Linear warmup over 5 steps to 3e-3, then a cosine to a tenth at step 20 (model_args).
double sum_of_learning_rates(int steps) {
  double sum = 0;
  for (int t = 1; t <= steps; ++t)
    sum += t <= 5 ? 3e-3 * t / 5 : 3e-4 + 0.5 * (3e-3 - 3e-4) * (1 + std::cos(M_PI * (t - 5) / 15.0));
  return sum;
}

// The worst element of two checkpoints' state, as a multiple of the tolerance, and how
// many parameters lie beyond kAbs + kRel |serial|.
struct StateDiff {
  double worst = 0, worst_abs = 0;
  std::string where;
  size_t params_beyond = 0, params = 0;
  double worst_param = 0;  // largest absolute parameter difference
  bool ok() const { return worst <= 1.0 && params_beyond * kFew <= params; }
};
StateDiff compare_state(const std::string& dir, const std::string& ref_dir) {
  st::CheckpointReader a(dir), b(ref_dir);
  EXPECT_EQ(a.header().num_params, b.header().num_params);
  EXPECT_EQ(a.header().step, b.header().step);
  const size_t n = b.header().num_params;
  const double adam_reach = sum_of_learning_rates(static_cast<int>(b.header().step));
  std::vector<float> x(n), y(n);
  StateDiff d;
  d.params = n;
  const char* names[] = {"parameters", "Adam m", "Adam v"};
  for (int s = 0; s < 3; ++s) {
    a.read(static_cast<st::Section>(s), 0, n, x.data());
    b.read(static_cast<st::Section>(s), 0, n, y.data());
    for (size_t i = 0; i < n; ++i) {
      const double diff = std::fabs(static_cast<double>(x[i]) - y[i]);
      double tol = kAbs + kRel * std::fabs(y[i]);
      if (s == 0) {
        d.worst_param = std::max(d.worst_param, diff);
        if (diff > tol) ++d.params_beyond, tol = adam_reach;
      }
      const double ratio = diff / tol;
      if (!(ratio <= d.worst)) {
        d.worst = std::isnan(ratio) ? INFINITY : ratio;
        d.worst_abs = diff;
        d.where = std::string(names[s]) + "[" + std::to_string(i) + "]";
      }
    }
  }
  return d;
}

std::string describe(const StateDiff& d) {
  std::ostringstream o;
  o << "parameters worst " << d.worst_param << ", " << d.params_beyond << " of " << d.params << " beyond "
    << kAbs << " + " << kRel << "|ref| (at most 1 in " << kFew << "); worst against its tolerance "
    << d.worst << " at " << d.where;
  return o.str();
}

// The serial reference of a model: its run and its final checkpoint.
struct Serial {
  TempDir dir;
  TrainRun run;
};
const Serial& serial(int layers) {
  static std::map<int, Serial> cache;
  auto [it, fresh] = cache.try_emplace(layers);
  if (fresh) it->second.run = run_train(0, plus(model_args(layers), {"--save", it->second.dir.path}));
  return it->second;
}

void expect_same_losses(const TrainRun& r, const TrainRun& s, int from, double* worst) {
  for (int step = from; step <= 20; ++step) {
    ASSERT_TRUE(r.loss.count(step) && s.loss.count(step)) << "no loss for step " << step << "\n" << r.describe();
    const double d = rel_diff(r.loss.at(step), s.loss.at(step));
    *worst = std::max(*worst, d);
    EXPECT_LE(d, kLossRel) << "step " << step << ": " << r.loss.at(step) << " vs serial " << s.loss.at(step);
  }
  for (auto& [step, loss] : s.val_loss) {
    if (step < from) continue;
    ASSERT_TRUE(r.val_loss.count(step)) << "no validation at step " << step;
    EXPECT_LE(rel_diff(r.val_loss.at(step), loss), kLossRel) << "validation at step " << step;
  }
}

// Ranks holding the same tensors hold the same values: the data-parallel replicas of a
// (tp, pp) position everything, the tensor-parallel ranks of a stage the replicated tensors.
void expect_replicas_agree(const TrainRun& r, int ranks) {
  if (r.proc.out.find(" | tp ") == std::string::npos) {  // data parallel alone: every rank a replica
    ASSERT_EQ(static_cast<int>(r.checksums.size()), ranks) << r.describe();
    for (const std::string& c : r.checksums) EXPECT_EQ(c, r.checksums[0]) << "dp replicas differ";
    return;
  }
  ASSERT_EQ(static_cast<int>(r.ranks.size()), ranks) << r.describe();
  for (const auto& a : r.ranks)
    for (const auto& b : r.ranks) {
      if (a.tp == b.tp && a.pp == b.pp) {
        EXPECT_EQ(a.checksum, b.checksum) << "dp replicas of tp " << a.tp << " pp " << a.pp << " differ";
      }
      if (a.pp == b.pp) {
        EXPECT_EQ(a.replicated, b.replicated) << "replicated tensors of stage " << a.pp << " differ";
      }
    }
}

struct Case {
  std::string name;
  int ranks;
  std::string flags;
  int layers = 6;
  std::map<std::string, std::string> env = {};
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

class ParallelGolden : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelGolden, MatchesSerial) {
  const Case& c = GetParam();
  const Serial& s = serial(c.layers);
  ASSERT_TRUE(s.run.ok()) << s.run.describe();
  TempDir dir;
  TrainRun r = run_train(c.ranks, plus(plus(model_args(c.layers), split_words(c.flags)), {"--save", dir.path}),
                         90, c.env);
  ASSERT_TRUE(r.ok()) << r.describe();
  double worst = 0;
  expect_same_losses(r, s.run, 1, &worst);
  const StateDiff d = compare_state(dir.path, s.dir.path);
  EXPECT_TRUE(d.ok()) << "gathered state differs from the serial run's: " << describe(d);
  expect_replicas_agree(r, c.ranks);
  EXPECT_EQ(r.proc.out.find("(differs)"), std::string::npos)
      << "a group's traffic differs from its formula\n" << r.describe();
  std::cout << c.name << " (" << c.flags << "): 20 losses worst relative " << worst
            << " (step 20: " << r.loss.rbegin()->second << " vs " << s.run.loss.rbegin()->second
            << "); gathered state: " << describe(d) << "; replicas agree; traffic = formula\n";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (std::string sp : {"", " --sequence-parallel"}) {
    const std::string tag = sp.empty() ? "" : "_sp";
    v.push_back({"tp2" + tag, 2, "--tp 2" + sp});
    v.push_back({"tp4" + tag, 4, "--tp 4" + sp});
    v.push_back({"tp2_dp2_zero1" + tag, 4, "--tp 2 --dp 2 --zero 1" + sp});
  }
  for (std::string sched : {"gpipe", "1f1b", "interleaved"}) {
    const std::string m = " --microbatches 4 --schedule " + sched;
    v.push_back({"pp2_" + sched, 2, "--pp 2" + m});
    v.push_back({"pp4_" + sched, 4, "--pp 4" + m, sched == "interleaved" ? 8 : 6});
    v.push_back({"pp2_dp2_zero2_" + sched, 4, "--pp 2 --dp 2 --zero 2" + m});
    for (std::string sp : {"", " --sequence-parallel"}) {
      const std::string tag = sp.empty() ? "" : "_sp";
      v.push_back({"tp2_pp2_" + sched + tag, 4, "--tp 2 --pp 2" + m + sp});
      v.push_back({"tp2_pp2_dp2_" + sched + tag, 8, "--tp 2 --pp 2 --dp 2 --zero 1" + m + sp});
    }
  }
  // ZeRO-3: parameters sharded and gathered per layer group, alone and under every kind of
  // model parallelism, with prefetch and recomputation.
  v.push_back({"dp2_zero3", 2, "--dp 2 --zero 3"});
  v.push_back({"dp4_zero3_prefetch2", 4, "--dp 4 --zero 3 --prefetch 2"});
  v.push_back({"dp4_zero3_prefetch0", 4, "--dp 4 --zero 3 --prefetch 0"});
  v.push_back({"tp2_dp2_zero3_sp", 4, "--tp 2 --dp 2 --zero 3 --sequence-parallel"});
  v.push_back({"pp2_dp2_zero3_1f1b", 4, "--pp 2 --dp 2 --zero 3 --microbatches 4 --schedule 1f1b"});
  v.push_back({"tp2_pp2_dp2_zero3_1f1b_sp_recompute", 8,
               "--tp 2 --pp 2 --dp 2 --zero 3 --microbatches 4 --schedule 1f1b --sequence-parallel --recompute block"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Parallel, ParallelGolden, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------
// A checkpoint holds the whole model in canonical order, so one written by tp 2 x pp 2
// continues the serial curve as dp 4 and as a single process, and continues bit for bit
// under its own layout.
TEST(ParallelResume, AcrossLayouts) {
  const Serial& s = serial(6);
  ASSERT_TRUE(s.run.ok()) << s.run.describe();
  const std::vector<std::string> mp = {"--tp", "2", "--pp", "2", "--microbatches", "4", "--sequence-parallel"};
  TempDir dir;
  TrainRun first = run_train(4, plus(plus(model_args(6), mp), {"--stop-at", "10", "--save", dir.path}));
  ASSERT_TRUE(first.ok()) << first.describe();
  struct Resumed {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  for (const Resumed& to : {Resumed{"dp 4 zero 1", 4, {"--dp", "4", "--zero", "1"}}, Resumed{"serial", 0, {}},
                            Resumed{"tp 2 x pp 2", 4, mp}}) {
    TempDir end;
    TrainRun r = run_train(to.ranks, plus(plus(model_args(6), to.flags), {"--resume", dir.path, "--save", end.path}));
    ASSERT_TRUE(r.ok()) << r.describe();
    ASSERT_EQ(r.loss.size(), 10u) << r.describe();
    ASSERT_EQ(r.loss.begin()->first, 11);
    double worst = 0;
    expect_same_losses(r, s.run, 11, &worst);
    const StateDiff d = compare_state(end.path, s.dir.path);
    EXPECT_TRUE(d.ok()) << to.name << ": state at step 20: " << describe(d);
    std::cout << "tp 2 x pp 2 checkpoint at step 10 resumed as " << to.name << ": losses 11..20 worst relative "
              << worst << " against the uninterrupted serial run; state at 20: " << describe(d) << "\n";
  }
}

// A checkpoint written under ZeRO-3 (each rank holding its shard of the parameters) holds
// the whole model as any other: it continues the serial curve under ZeRO-1 on as many ranks
// and under ZeRO-3 on twice as many, and a ZeRO-1 checkpoint continues under ZeRO-3.
TEST(ParallelResume, Zero3AcrossZeroModesAndRankCounts) {
  const Serial& s = serial(6);
  ASSERT_TRUE(s.run.ok()) << s.run.describe();
  struct Leg {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  const Leg z3{"dp 2 zero 3", 2, {"--dp", "2", "--zero", "3"}};
  const Leg z1{"dp 2 zero 1", 2, {"--dp", "2", "--zero", "1"}};
  const Leg z3_4{"dp 4 zero 3", 4, {"--dp", "4", "--zero", "3"}};
  for (const auto& [from, to] : {std::pair{z3, z1}, std::pair{z3, z3_4}, std::pair{z1, z3}}) {
    TempDir dir, end;
    TrainRun first = run_train(from.ranks, plus(plus(model_args(6), from.flags), {"--stop-at", "10", "--save", dir.path}));
    ASSERT_TRUE(first.ok()) << first.describe();
    TrainRun r = run_train(to.ranks, plus(plus(model_args(6), to.flags), {"--resume", dir.path, "--save", end.path}));
    ASSERT_TRUE(r.ok()) << r.describe();
    ASSERT_EQ(r.loss.size(), 10u) << r.describe();
    double worst = 0;
    expect_same_losses(r, s.run, 11, &worst);
    const StateDiff d = compare_state(end.path, s.dir.path);
    EXPECT_TRUE(d.ok()) << from.name << " -> " << to.name << ": state at step 20: " << describe(d);
    std::cout << from.name << " checkpoint at step 10 resumed as " << to.name << ": losses 11..20 worst relative "
              << worst << " against the serial run; state at 20: " << describe(d) << "\n";
  }
}

// ---------------------------------------------------------------------------------------
// The layout follows the hierarchy the communicator sees: with nodes of two ranks
// (STRATA_HIERARCHY emulates them), tensor-parallel groups sit inside a node and data
// parallel crosses nodes; --layout dp,tp,pp puts tensor parallelism across the nodes.
// Either way the first steps are the serial run's.
TEST(ParallelLayout, FollowsTheHierarchy) {
  const Serial& s = serial(6);
  ASSERT_TRUE(s.run.ok()) << s.run.describe();
  const std::vector<std::string> args = plus(model_args(6), {"--tp", "2", "--dp", "2", "--stop-at", "3"});
  TrainRun derived = run_train(4, args, 90, {{"STRATA_HIERARCHY", "node:2"}});
  ASSERT_TRUE(derived.ok()) << derived.describe();
  EXPECT_NE(derived.proc.out.find("tp groups of 2: [0,1] [2,3] -- inside one node"), std::string::npos)
      << derived.describe();
  EXPECT_NE(derived.proc.out.find("dp groups of 2: [0,2] [1,3] -- across nodes"), std::string::npos)
      << derived.describe();
  TrainRun across = run_train(4, plus(args, {"--layout", "dp,tp,pp"}), 90, {{"STRATA_HIERARCHY", "node:2"}});
  ASSERT_TRUE(across.ok()) << across.describe();
  EXPECT_NE(across.proc.out.find("tp groups of 2: [0,2] [1,3] -- across nodes"), std::string::npos)
      << across.describe();
  for (const TrainRun* r : {&derived, &across})
    for (int step = 1; step <= 3; ++step)
      EXPECT_LE(rel_diff(r->loss.at(step), s.run.loss.at(step)), kLossRel) << "step " << step;
  for (auto& l : strata_test::lines_containing(derived.proc.out + across.proc.out, "groups of")) std::cout << l << "\n";
}

// ---------------------------------------------------------------------------------------
// Bad input: a clear message and a non-zero exit before any step runs.
struct Bad {
  std::string name;
  int ranks;
  std::string flags;
  std::string message;
};
std::ostream& operator<<(std::ostream& o, const Bad& b) { return o << b.name; }

class ParallelBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(ParallelBadInput, RejectedBeforeAnythingRuns) {
  const Bad& b = GetParam();
  TempDir dir;
  TrainRun r = run_train(b.ranks, plus(plus(model_args(6), split_words(b.flags)), {"--save", dir.path + "/ck"}), 60);
  EXPECT_TRUE(r.proc.exited && r.proc.exit_code != 0) << r.describe();
  EXPECT_NE(r.proc.out.find(b.message), std::string::npos) << "expected: " << b.message << "\n" << r.describe();
  EXPECT_TRUE(r.loss.empty()) << r.describe();
  EXPECT_TRUE(train_test::snapshot(dir.path).empty()) << "something was written";
  for (auto& line : strata_test::lines_containing(r.proc.out, "error:")) std::cout << line << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Parallel, ParallelBadInput,
    ::testing::Values(
        Bad{"GridNotTheRankCount", 4, "--tp 2 --pp 2 --dp 2", "--tp 2 x --pp 2 x --dp 2 = 8 ranks but the job has 4 ranks"},
        Bad{"GridDoesNotDivide", 4, "--tp 3", "--tp 3 x --pp 1 = 3 does not divide the job's 4 ranks"},
        Bad{"HeadsNotDivisible", 2, "--tp 2 --heads 1", "--tp 2 does not divide --heads 1"},
        Bad{"FewerLayersThanStages", 2, "--pp 2 --schedule interleaved --virtual-stages 4",
            "--layers 6 is fewer than the 8 pipeline stages"},
        Bad{"MicrobatchesDoNotDivide", 2, "--pp 2 --microbatches 3", "--microbatches 3 does not divide the 8 sequences"},
        Bad{"InterleavedNeedsGroupsOfP", 2, "--pp 2 --schedule interleaved --microbatches 1",
            "--microbatches 1 is not a multiple of it"},
        Bad{"SequenceParallelWithoutTp", 0, "--sequence-parallel", "--sequence-parallel needs --tp 2 or more"},
        Bad{"BadLayout", 0, "--layout tp,pp", "--layout needs tp, pp and dp once each"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
