// strata-train --on-failure shrink: a rank of a 4-rank data-parallel job is SIGKILLed once
// step 10 is printed; the 3 others go on from their state with the same global batch and
// must print the serial run's losses and validation losses (relative 1e-5, as the parallel
// golden runs: only the order of the reductions differs) to the end, and agree on their
// parameters. The ranks are spawned directly, as strata-run would stop the survivors.
// Then the flags that cannot go on after a failure are refused.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "failure_job.hpp"
#include "train_proc.hpp"

using train_test::losses;
using train_test::rel_diff;

namespace {

constexpr int kSteps = 60;



std::vector<std::string> model_args() {
  return {"--data",      STRATA_DATA_PATH, "--layers",     "2",   "--heads",        "4",
          "--dim",       "32",             "--ctx",        "16",  "--batch",        "8",
          "--steps",     std::to_string(kSteps), "--warmup", "5", "--lr",           "3e-3",
          "--eval-every", "20",            "--eval-batches", "2", "--sample-len",   "0",
          "--bucket-mb", "0.01",           "--threads",    "1"};
}

void kill_one_and_compare(int victim) {
  const train_test::TrainRun serial = train_test::run_train(0, model_args());
  ASSERT_TRUE(serial.ok()) << serial.describe();

  std::vector<std::string> argv{STRATA_TRAIN_PATH};
  for (const std::string& a : model_args()) argv.push_back(a);
  argv.insert(argv.end(), {"--on-failure", "shrink"});
  strata_test::JobSpecs js = strata_test::job_specs(argv, 4, {{"STRATA_TIMEOUT", "20"}}, {});
  std::vector<strata_test::Process> ranks;
  for (const auto& spec : js.ranks) ranks.emplace_back(spec);
  // Rank 0 prints the progress; the victim dies a little after step 10.
  ASSERT_TRUE(ranks[0].wait_for_output("step    10/", 60)) << "no step 10";
  kill(-ranks[static_cast<size_t>(victim)].pid(), SIGKILL);
  std::vector<strata_test::ProcResult> res;
  for (auto& p : ranks) res.push_back(p.finish(60));
  strata::remove_job_segments(js.secret);
  std::string all;
  for (size_t r = 0; r < res.size(); ++r) all += "---- rank " + std::to_string(r) + ": " + res[r].describe() + "\n" + res[r].out + res[r].err;

  EXPECT_EQ(res[static_cast<size_t>(victim)].term_signal, SIGKILL) << all;
  std::map<std::string, std::string> got;
  std::vector<std::string> checksums, went_on;
  for (int r = 0; r < 4; ++r) {
    const strata_test::ProcResult& p = res[static_cast<size_t>(r)];
    for (auto& [k, v] : losses(p.out)) {  // the victim's too, from before it died
      EXPECT_TRUE(!got.count(k) || got[k] == v) << "step " << k << " printed twice, differently\n" << all;
      got[k] = v;
    }
    if (r == victim) continue;
    EXPECT_TRUE(p.exited && p.exit_code == 0) << "rank " << r << ": " << p.describe() << "\n" << all;
    for (const std::string& l : strata_test::lines_containing(p.out, "parameter checksum"))
      checksums.push_back(l.substr(l.rfind(' ') + 1));
    for (const std::string& l : strata_test::lines_containing(p.out, "ranks go on from step")) went_on.push_back(l);
  }
  ASSERT_EQ(went_on.size(), 1u) << "the new rank 0 says once where the survivors went on\n" << all;
  std::cout << went_on[0] << "\n";
  int failed_at = 0, victim_named = -1;
  std::sscanf(went_on[0].c_str(), "step %d: rank %d failed", &failed_at, &victim_named);
  EXPECT_EQ(victim_named, victim) << went_on[0];
  // The survivor that prints may still have been in step 10 when the victim died.
  EXPECT_GE(failed_at, 10) << went_on[0];
  EXPECT_LE(failed_at, kSteps) << went_on[0];
  EXPECT_NE(went_on[0].find("3 ranks go on"), std::string::npos) << went_on[0];
  // Every survivor holds the same parameters at the end.
  ASSERT_EQ(checksums.size(), 3u) << all;
  EXPECT_TRUE(std::all_of(checksums.begin(), checksums.end(), [&](const std::string& c) { return c == checksums[0]; }))
      << all;
  // The curve: every loss printed is the serial one. The step the victim died in may have
  // been completed by a survivor other than rank 0, which then does not print it.
  double worst = 0;
  int missing = 0;
  for (const auto& [step, loss] : serial.loss) {
    auto it = got.find(std::to_string(step));
    if (it == got.end()) {
      ++missing;
      EXPECT_EQ(step, failed_at) << "step " << step << " was not printed\n" << all;
      continue;
    }
    const double d = rel_diff(it->second, loss);
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-5) << "step " << step << ": " << it->second << " vs serial " << loss;
  }
  for (const auto& [step, loss] : serial.val_loss) {
    const std::string k = "v" + std::to_string(step);
    ASSERT_TRUE(got.count(k)) << "no validation loss at step " << step << "\n" << all;
    worst = std::max(worst, rel_diff(got[k], loss));
    EXPECT_LE(rel_diff(got[k], loss), 1e-5) << "validation at step " << step;
  }
  std::cout << "rank " << victim << " killed, failed in step " << failed_at << "; " << kSteps - missing << " of " << kSteps
            << " losses and " << serial.val_loss.size() << " validation losses printed, worst relative difference "
            << worst << " from the serial run\n";
}

TEST(OnFailureShrink, KilledRankTheOthersStayOnTheSerialCurve) { kill_one_and_compare(2); }

// Rank 0 prints the progress: after it dies, rank 0 of the survivors (rank 1) does.
TEST(OnFailureShrink, KilledRankZeroTheOthersStayOnTheSerialCurve) { kill_one_and_compare(0); }

// tp 2 x pp 2 x dp 2 (ZeRO-1) on 8 ranks, a checkpoint every 5 steps; a rank is SIGKILLed
// once rank 0 has printed step 7. What it held is gone, so the 7 survivors go back to the
// last checkpoint (step 5, or a later one if the test read the line late) on the largest
// layout that fits them, tp 2 x pp 2 x dp 1 on 4 ranks (the other 3 leave), and must print
// the losses of a fresh tp 2 x pp 2 run resumed from that checkpoint, which an
// uninterrupted run stopped at that step writes (bit for bit: the run is deterministic).
// Or another layout: its ranks, flags, the layout the survivors go on as, and on how many.
struct Shrunk {
  int ranks = 8;
  std::vector<std::string> layout = {"--tp", "2", "--pp", "2", "--microbatches", "4", "--zero", "1"};
  std::string goes_on = "7 ranks left, 4 go on as tp 2 x pp 2 x dp 1";
  int after = 4;  // ranks
  std::vector<std::string> after_flags = {};  // of a fresh run of that layout
};
void back_to_the_checkpoint_after_killing(int victim, const Shrunk& c = {}) {
  const int kRanks = c.ranks;
  constexpr int kEnd = 20;
  const size_t kVictim = static_cast<size_t>(victim);
  std::vector<std::string> model = {"--data",     STRATA_DATA_PATH, "--layers", "2",   "--heads",    "4",
                                    "--dim",      "32",             "--ctx",    "16",  "--batch",    "8",
                                    "--steps",    std::to_string(kEnd), "--warmup", "5", "--lr",     "3e-3",
                                    "--eval-every", "10",           "--eval-batches", "2", "--sample-len", "0",
                                    "--bucket-mb", "0.01",          "--threads", "1"};
  model.insert(model.end(), c.layout.begin(), c.layout.end());
  const std::string ckpt = train_test::make_temp_dir("relayout"), ref_dir = train_test::make_temp_dir("relayout-ref");

  std::vector<std::string> argv{STRATA_TRAIN_PATH};
  for (const std::string& a : model) argv.push_back(a);
  argv.insert(argv.end(), {"--save", ckpt, "--save-every", "5", "--on-failure", "shrink"});
  strata_test::JobSpecs js = strata_test::job_specs(argv, kRanks, {{"STRATA_TIMEOUT", "20"}}, {});
  std::vector<strata_test::Process> ranks;
  for (const auto& spec : js.ranks) ranks.emplace_back(spec);
  ASSERT_TRUE(ranks[0].wait_for_output("step     7/", 90)) << "no step 7";
  const double killed_at = strata_test::now_s();
  kill(-ranks[kVictim].pid(), SIGKILL);
  // The first survivor prints where the survivors go on once they have reloaded the checkpoint.
  EXPECT_TRUE(ranks[victim == 0 ? 1 : 0].wait_for_output("go on as", 60));
  const double recovered_s = strata_test::now_s() - killed_at;
  std::vector<strata_test::ProcResult> res;
  for (auto& p : ranks) res.push_back(p.finish(90));
  strata::remove_job_segments(js.secret);
  std::string all;
  for (size_t r = 0; r < res.size(); ++r) all += "---- rank " + std::to_string(r) + ": " + res[r].describe() + "\n" + res[r].out + res[r].err;
  train_test::remove_tree(ckpt);

  EXPECT_EQ(res[kVictim].term_signal, SIGKILL) << all;
  std::vector<std::string> went_on, left;
  // The last value printed for each step: the victim printed the first ones if it was rank 0.
  std::map<std::string, std::string> got = losses(res[kVictim].out);
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    EXPECT_TRUE(res[r].exited && res[r].exit_code == 0) << "rank " << r << ": " << res[r].describe() << "\n" << all;
    for (const std::string& l : strata_test::lines_containing(res[r].out, "go on as")) went_on.push_back(l);
    for (const std::string& l : strata_test::lines_containing(res[r].out, "it leaves")) left.push_back(l);
    for (auto& [k, v] : losses(res[r].out)) got[k] = v;
  }
  ASSERT_EQ(went_on.size(), 1u) << all;
  EXPECT_NE(went_on[0].find("rank " + std::to_string(victim) + " failed; " + c.goes_on), std::string::npos)
      << went_on[0];
  int at = 0;
  ASSERT_NE(went_on[0].find("from the checkpoint of step "), std::string::npos) << went_on[0];
  std::sscanf(went_on[0].c_str() + went_on[0].find("from the checkpoint of step "), "from the checkpoint of step %d", &at);
  EXPECT_TRUE(at >= 5 && at % 5 == 0) << went_on[0];
  EXPECT_EQ(static_cast<int>(left.size()), kRanks - 1 - c.after) << all;

  const train_test::TrainRun first = train_test::run_train(
      kRanks, train_test::plus(model, {"--stop-at", std::to_string(at), "--save", ref_dir}));
  ASSERT_TRUE(first.ok()) << first.describe();
  const train_test::TrainRun resumed = train_test::run_train(
      c.after, train_test::plus(train_test::plus(model, c.after_flags), {"--resume", ref_dir}));
  ASSERT_TRUE(resumed.ok()) << resumed.describe();
  train_test::remove_tree(ref_dir);
  double worst = 0;
  for (int step = 1; step <= kEnd; ++step) {
    const train_test::TrainRun& ref = step <= at ? first : resumed;
    ASSERT_TRUE(got.count(std::to_string(step))) << "no loss for step " << step << "\n" << all;
    const double d = rel_diff(got[std::to_string(step)], ref.loss.at(step));
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-5) << "step " << step << ": " << got[std::to_string(step)] << " vs " << ref.loss.at(step);
  }
  for (const auto& [step, loss] : resumed.val_loss) {
    if (step <= at) continue;
    ASSERT_TRUE(got.count("v" + std::to_string(step))) << "no validation at step " << step << "\n" << all;
    EXPECT_LE(rel_diff(got["v" + std::to_string(step)], loss), 1e-5) << "validation at step " << step;
  }
  std::cout << went_on[0] << "\n" << left.size() << " survivors left the job; losses 1-" << at
            << " against the uninterrupted run, " << at + 1 << "-" << kEnd << " against the survivors' layout resumed from its checkpoint: worst relative " << worst
            << "; from the kill to the survivors going on: " << recovered_s << " s\n";
}

TEST(OnFailureShrink, ModelParallelGoesBackToTheCheckpointOnFewerRanks) { back_to_the_checkpoint_after_killing(5); }

// Rank 0 prints and writes the checkpoints: rank 1 takes both over.
TEST(OnFailureShrink, ModelParallelGoesBackToTheCheckpointWithoutRankZero) { back_to_the_checkpoint_after_killing(0); }

// ZeRO-3 over 4 ranks: each held a quarter of the parameters. The 3 survivors go back to
// the checkpoint as dp 2 (the largest that divides the batch), and one leaves.
TEST(OnFailureShrink, Zero3GoesBackToTheCheckpointOnFewerRanks) {
  back_to_the_checkpoint_after_killing(2, Shrunk{4, {"--dp", "4", "--zero", "3"}, "3 ranks left, 2 go on as tp 1 x pp 1 x dp 2", 2, {"--dp", "2"}});
}

// Where a rank holds what no other does, the survivors need a checkpoint to go back to.
TEST(OnFailureShrink, RefusedWithoutACheckpointToGoBackTo) {
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{{{"--tp", "2"}, "with --tp or --pp above 1 goes on from the last checkpoint"},
                                       {{"--pp", "2"}, "with --tp or --pp above 1 goes on from the last checkpoint"},
                                       {{"--zero", "1"}, "with --zero 1 goes on from the last checkpoint"},
                                       {{"--zero", "2"}, "it needs --save DIR"},
                                       {{"--diloco-h", "10", "--islands", "2"}, "--on-failure continue lets"}}) {
    std::vector<std::string> args = model_args();
    args.insert(args.end(), b.args.begin(), b.args.end());
    args.insert(args.end(), {"--on-failure", "shrink"});
    const train_test::TrainRun r = train_test::run_train(2, args, 60);
    EXPECT_FALSE(r.ok()) << r.describe();
    EXPECT_NE(r.proc.out.find(b.says), std::string::npos) << r.describe();
  }
}

}  // namespace
