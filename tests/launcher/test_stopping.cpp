// Ranks that fail, and stopping a job: strata-run's exit status and that no rank survives.
#include <signal.h>
#include <string.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include "launcher_process.hpp"

namespace launcher_test {
namespace {

using namespace std::chrono_literals;

// A rank that records its own pid and its child's, then waits for the child: stopping it
// must stop both, the rank's whole process group.
const std::string kWaitForever = "sleep 30 & record child $!; record rank $$; wait";

TEST(Stopping, AllRanksSucceed) {
  ProcResult r = run_launcher({"-n", "3", "/bin/sh", "-c", "exit 0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Stopping, FailingRankStopsTheOthers) {
  TempDir dir;
  std::string script =
      std::string(kRecordFn) +
      "if [ \"$STRATA_RANK\" = 2 ]; then record rank $$; await_ranks 4; exit 3; fi; " +
      kWaitForever;
  ProcResult r = run_launcher({"-n", "4", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 3) << "the failing rank's status";
  EXPECT_LT(r.elapsed_s, 10);
  EXPECT_TRUE(contains(r.err, "strata-run: rank 2 exited with status 3\n"));
  std::set<pid_t> pids = recorded_pids(dir.path());
  EXPECT_EQ(pids.size(), 7u) << "4 ranks and 3 children";
  EXPECT_EQ(survivors(pids), std::set<pid_t>{});
}

// --keep-going: the others run to their end (a job that shrinks and goes on); the exit
// status is still the failed rank's.
TEST(Stopping, KeepGoingLetsTheOthersFinish) {
  TempDir dir;
  std::string script = std::string(kRecordFn) +
                       "if [ \"$STRATA_RANK\" = 2 ]; then exit 3; fi; sleep 0.5; : > \"$TESTDIR/done.$STRATA_RANK\"";
  ProcResult r = run_launcher({"--keep-going", "-n", "4", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "strata-run: rank 2 exited with status 3\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "go on (--keep-going)")) << r.err;
  for (int rank : {0, 1, 3}) EXPECT_EQ(::access((dir.path() / ("done." + std::to_string(rank))).c_str(), F_OK), 0) << rank;
}

// Shared-memory segments are named after the job's secret ("strata-" + its first 12 hex
// digits + "-"): a rank killed before unlinking its segment leaves it, and strata-run
// removes those of its job, and only those, once every rank is gone.
TEST(Stopping, LeftoverSegmentsOfTheJobAreRemoved) {
  const std::string other = "/dev/shm/strata-000000000000-7-0";
  { FILE* f = fopen(other.c_str(), "w"); ASSERT_NE(f, nullptr); fclose(f); }
  TempDir dir;
  std::string script =
      "p=/dev/shm/strata-$(printf %.12s \"$STRATA_SECRET\")-1-$STRATA_RANK; : > \"$p\"; "
      "echo \"$p\" > \"$TESTDIR/seg.$STRATA_RANK\"; "
      // Rank 1 dies only once rank 0 has made its segment: dying sooner can stop rank 0
      // before it ran at all (seen in CI).
      "if [ \"$STRATA_RANK\" = 1 ]; then i=0; while [ ! -s \"$TESTDIR/seg.0\" ] && [ $i -lt 500 ]; do "
      "sleep 0.01; i=$((i+1)); done; kill -9 $$; fi; exit 0";
  ProcResult r = run_launcher({"-n", "2", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  for (int rank : {0, 1}) {
    std::ifstream in(dir.path() / ("seg." + std::to_string(rank)));
    std::string seg;
    ASSERT_TRUE(std::getline(in, seg)) << "rank " << rank << " did not run";
    EXPECT_NE(::access(seg.c_str(), F_OK), 0) << seg << " is still there";
  }
  EXPECT_EQ(::access(other.c_str(), F_OK), 0) << "another job's segment was removed";
  ::unlink(other.c_str());
}

TEST(Stopping, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  std::string script = std::string(kRecordFn) +
                       "if [ \"$STRATA_RANK\" = 0 ]; then await_ranks 1; exit 1; fi; "
                       "trap '' TERM; " + kWaitForever;
  ProcResult r =
      run_launcher({"--grace", "0.5", "-n", "2", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_GE(r.elapsed_s, 0.5) << "SIGKILL came before the grace period was over";
  EXPECT_LT(r.elapsed_s, 5);
  EXPECT_TRUE(contains(r.err, "strata-run: rank 0 exited with status 1\n"));
  EXPECT_TRUE(contains(r.err, "sending SIGKILL"));
  std::set<pid_t> pids = recorded_pids(dir.path());
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_EQ(survivors(pids), std::set<pid_t>{});
}

TEST(Stopping, RankKilledBySignalIsReported) {
  TempDir dir;
  std::string script = std::string(kRecordFn) +
                       "if [ \"$STRATA_RANK\" = 1 ]; then await_ranks 1; kill -KILL $$; fi; " +
                       kWaitForever;
  ProcResult r = run_launcher({"-n", "2", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_LT(r.elapsed_s, 10);
  EXPECT_TRUE(contains(r.err, "strata-run: rank 1 killed by signal SIGKILL\n"));
  EXPECT_EQ(survivors(recorded_pids(dir.path())), std::set<pid_t>{});
}

TEST(Stopping, CommandNotFound) {
  ProcResult r = run_launcher({"-n", "2", "strata-no-such-command"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_LT(r.elapsed_s, 10);
  // The first rank to fail gets the others stopped, possibly before they reach exec: only
  // one message is certain.
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(\[(\d)\] strata-run: rank \1: cannot execute strata-no-such-command: )"
                        R"(No such file or directory\n)")))
      << r.err;
  EXPECT_TRUE(
      std::regex_search(r.err, std::regex(R"(strata-run: rank \d exited with status 127\n)")))
      << r.err;

  ProcResult by_path = run_launcher({"-n", "1", "/nonexistent/dir/prog"});
  EXPECT_EQ(by_path.exit_code, 127);
  EXPECT_TRUE(contains(by_path.err, "cannot execute /nonexistent/dir/prog"));
}

TEST(Stopping, LeftoverBackgroundProcessesDoNotHoldTheJob) {
  // The background sleep keeps the rank's stdout open; the job still ends with the rank.
  TempDir dir;
  std::string script = std::string(kRecordFn) + "sleep 30 & record child $!; echo done";
  ProcResult r = run_launcher({"-n", "2", "/bin/sh", "-c", script}, {dir.env()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.elapsed_s, 5);
  EXPECT_TRUE(contains(r.out, "[1] done\n"));
  std::set<pid_t> pids = recorded_pids(dir.path());
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_EQ(survivors(pids), std::set<pid_t>{});
}

class SignalToLauncher : public ::testing::TestWithParam<int> {};

TEST_P(SignalToLauncher, StopsAllRanks) {
  const int sig = GetParam();
  TempDir dir;
  Process launch = start_launcher({"-n", "3", "/bin/sh", "-c", std::string(kRecordFn) + kWaitForever},
                {dir.env()});
  ASSERT_TRUE(wait_for_recorded(dir.path(), 6, 5000ms)) << "ranks did not start";
  kill(launch.pid(), sig);
  ProcResult r = launch.finish(kLaunchDeadline);
  EXPECT_FALSE(r.killed_by_deadline);
  EXPECT_EQ(r.exit_code, 128 + sig);
  EXPECT_LT(r.elapsed_s, 8);
  EXPECT_TRUE(contains(r.err, "strata-run: got SIG"));
  EXPECT_EQ(survivors(recorded_pids(dir.path())), std::set<pid_t>{});
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalToLauncher, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

TEST(Stopping, SecondSignalKillsAtOnce) {
  TempDir dir;
  Process launch = start_launcher({"--grace", "20", "-n", "2", "/bin/sh", "-c",
                 std::string(kRecordFn) + "trap '' TERM; " + kWaitForever},
                {dir.env()});
  ASSERT_TRUE(wait_for_recorded(dir.path(), 4, 5000ms));
  kill(launch.pid(), SIGTERM);
  std::this_thread::sleep_for(200ms);
  kill(launch.pid(), SIGTERM);
  ProcResult r = launch.finish(kLaunchDeadline);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_LT(r.elapsed_s, 8) << "did not wait for the 20 s grace period";
  EXPECT_EQ(survivors(recorded_pids(dir.path())), std::set<pid_t>{});
}

TEST(Stopping, RanksDieWithAKilledLauncher) {
  // SIGKILL leaves strata-run no chance to clean up; the ranks must not live on.
  TempDir dir;
  Process launch = start_launcher(
      {"-n", "2", "/bin/sh", "-c", std::string(kRecordFn) + "record rank $$; exec sleep 30"},
      {dir.env()});
  ASSERT_TRUE(wait_for_recorded(dir.path(), 2, 5000ms));
  kill(launch.pid(), SIGKILL);
  launch.finish(kLaunchDeadline);
  EXPECT_EQ(survivors(recorded_pids(dir.path())), std::set<pid_t>{});
}

}  // namespace
}  // namespace launcher_test
