// Comm::shrink and strataCommShrink on real processes (spawned directly: strata-run would
// stop the survivors): a rank killed, then the survivors shrink and run every collective
// on the new communicator against formulas; a rank killed during the shrink itself; a
// stopped rank left out after the timeout; the C API. RELIABILITY_TRIALS (default 3) sets
// how many random moments the during-the-shrink test tries.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "failure_job.hpp"

using namespace strata_test;

namespace {

constexpr int kRanks = 4;

int trials() { return reliability_trials(3); }

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// The survivors' last SHRUNK lines must all name `members` (old ranks in new order), each
// rank at its index; every check must be right; the parent must throw. Returns the time
// from `fault` (CLOCK_MONOTONIC, -1: unknown) to the last survivor's new communicator.
double expect_survivors(const Job& j, const std::vector<int>& members, const std::string& nodes = "") {
  double last = 0;
  for (size_t k = 0; k < members.size(); ++k) {
    const int r = members[k];
    const ProcResult& p = j.ranks[r];
    EXPECT_FALSE(p.killed_by_deadline) << "rank " << r << " hung\n" << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code == 0) << "rank " << r << ": " << p.describe() << "\n" << j.dump();
    const std::vector<std::string> shrunk = lines_containing(p.err, "SHRUNK old=");
    if (shrunk.empty()) {
      ADD_FAILURE() << "rank " << r << " did not shrink\n" << j.dump();
      continue;
    }
    const std::string& s = shrunk.back();
    std::cout << "rank " << r << ": " << s << "\n";
    EXPECT_EQ(field(s, "members"), joined(members)) << s;
    EXPECT_EQ(field(s, "new"), std::to_string(k)) << s;
    EXPECT_EQ(field(s, "size"), std::to_string(members.size())) << s;
    if (!nodes.empty()) {
      EXPECT_EQ(field(s, "nodes"), nodes) << "the hierarchy of the new communicator: " << s;
    }
    last = std::max(last, num(field(s, "at")));
    for (const std::string& c : lines_containing(p.err, "CHECK name="))
      EXPECT_NE(field(c, "outcome"), "wrong") << "rank " << r << ": " << c;
    EXPECT_FALSE(marker_line(p, "PARENT-THREW").empty()) << "rank " << r << ": the parent did not throw\n" << p.err;
    EXPECT_FALSE(marker_line(p, "SHRINK-AGAIN-REFUSED").empty())
        << "rank " << r << ": a second shrink of the parent was not refused\n" << p.err;
    EXPECT_FALSE(marker_line(p, "DONE").empty()) << p.err;
  }
  return last;
}

// How long the last shrink of `p` took (-1 when it has none: expect_survivors says so).
double shrink_took(const ProcResult& p) {
  const std::vector<std::string> shrunk = lines_containing(p.err, "SHRUNK");
  return shrunk.empty() ? -1 : num(field(shrunk.back(), "took"));
}

double marker_time(const ProcResult& p, const std::string& marker) { return num(field(marker_line(p, marker), "at")); }

struct KillCase {
  const char* name;
  std::map<std::string, std::string> env;
  int victim;
  std::string nodes;  // of the survivors, as the new communicator's hierarchy has them
};

class ShrinkAfterKill : public ::testing::TestWithParam<KillCase> {};

// One rank of 4 SIGKILLed mid all_reduce: the 3 others shrink without waiting for any
// timeout and every collective is right on the new communicator, numbered in old order.
TEST_P(ShrinkAfterKill, ThreeSurvivorsWorkOn) {
  const KillCase& c = GetParam();
  Job j = spawn({STRATA_SHRINK_WORKER_PATH, "killed"}, kRanks,
                with(c.env, {{"STRATA_TIMEOUT", "20"}, {"SHRINK_KILL", std::to_string(c.victim)}}), {}, 60);
  EXPECT_EQ(j.ranks[c.victim].term_signal, SIGKILL) << j.dump();
  std::vector<int> members;
  for (int r = 0; r < kRanks; ++r)
    if (r != c.victim) members.push_back(r);
  for (int r : members) {
    const std::string caught = marker_line(j.ranks[r], "CAUGHT");
    EXPECT_EQ(field(caught, "peer"), std::to_string(c.victim)) << caught;
  }
  const double last = expect_survivors(j, members, c.nodes);
  const double recover = last - marker_time(j.ranks[c.victim], "KILLING");
  std::cout << c.name << ": from the kill to the last survivor's new communicator " << recover << " s\n";
  EXPECT_LT(recover, 5.0) << "a timeout was waited for\n" << j.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Shrink, ShrinkAfterKill,
    ::testing::Values(KillCase{"shm", {}, 2, "0,0,0"},
                      KillCase{"tcp_check", {{"STRATA_TRANSPORT", "tcp"}, {"STRATA_CHECK", "1"}}, 0, "0,0,0"},
                      // Emulated nodes {0,1} {2,3}: rank 1 gone, the survivors' nodes stay apart.
                      KillCase{"nodes", {{"STRATA_HIERARCHY", "node:2"}}, 1, "0,1,1"}),
    [](const auto& info) { return std::string(info.param.name); });

// Rank 3 is killed; then rank 1 kills itself at a random moment of its own shrink. Ranks 0
// and 2 end with a communicator of the two of them (shrinking again should rank 1 die
// after the first shrink connected), never hanging.
TEST(Shrink, RankKilledDuringTheShrink) {
  std::mt19937 rng(std::random_device{}());
  for (int t = 0; t < trials(); ++t) {
    // The shrink takes a few milliseconds here; some kills land just after it, and then the
    // survivors' next call fails and they shrink again.
    const int us = std::uniform_int_distribution<int>(0, 6000)(rng);
    Job j = spawn({STRATA_SHRINK_WORKER_PATH, "killed"}, kRanks,
                  {{"STRATA_TIMEOUT", "5"}, {"SHRINK_KILL", "3"}, {"SHRINK_SECOND", "1"},
                   {"SHRINK_SECOND_US", std::to_string(us)}},
                  {}, 60);
    std::cout << "trial " << t << ": rank 1 killed " << us << " us into its shrink\n";
    EXPECT_EQ(j.ranks[1].term_signal, SIGKILL) << j.dump();
    const double last = expect_survivors(j, {0, 2});
    const double recover = last - marker_time(j.ranks[1], "KILLING-IN-SHRINK");
    std::cout << "  from the second kill to the last new communicator " << recover << " s\n";
    EXPECT_LT(recover, 2 * 5 + 2.0) << j.dump();
    if (HasFailure()) break;
  }
}

// A stopped rank is dead after STRATA_TIMEOUT. Alone, the call that timed out already
// found it stopped, so the shrink leaves it out at once; stopped 500 ms before another rank
// is killed (a margin a loaded machine's wake-ups cannot reverse), the survivors' call names the killed one and their shrink leaves the
// stopped one out once it has been silent for the timeout (and no more than a second beyond).
TEST(Shrink, StoppedRankIsLeftOut) {
  const int T = 2;
  {
    Job j = spawn({STRATA_SHRINK_WORKER_PATH, "stopped"}, kRanks, {{"STRATA_TIMEOUT", std::to_string(T)}, {"SHRINK_STOP", "1"}, {"SHRINK_REAP_S", "2"}},
                  {}, 40);
    for (int r : {0, 2, 3}) EXPECT_EQ(field(marker_line(j.ranks[r], "CAUGHT"), "peer"), "1") << j.dump();
    expect_survivors(j, {0, 2, 3});
    for (int r : {0, 2, 3}) {
      const double took = shrink_took(j.ranks[r]);
      EXPECT_LT(took, 1.0) << "rank " << r << ": the stopped rank was already found by the call that timed out";
    }
  }
  {
    Job j = spawn({STRATA_SHRINK_WORKER_PATH, "stopped"}, kRanks,
                  {{"STRATA_TIMEOUT", std::to_string(T)}, {"SHRINK_STOP", "1"}, {"SHRINK_KILL", "3"},
                   {"SHRINK_STOP_MS", "100"}, {"SHRINK_KILL_MS", "600"}, {"SHRINK_REAP_S", "2"}},
                  {}, 40);
    for (int r : {0, 2}) EXPECT_EQ(field(marker_line(j.ranks[r], "CAUGHT"), "peer"), "3") << j.dump();
    expect_survivors(j, {0, 2});
    // Rank 1 is dead once silent for STRATA_TIMEOUT: counted from when it stopped (the
    // parent's liveness check may have begun the count before the shrink), and the
    // shrink waits no more than a second beyond it.
    const double stopped_at = marker_time(j.ranks[1], "STOPPING");
    for (int r : {0, 2}) {
      const double took = shrink_took(j.ranks[r]);
      const double silent = num(field(lines_containing(j.ranks[r].err, "SHRUNK").back(), "at")) - stopped_at;
      std::cout << "rank " << r << ": shrink took " << took << " s, rank 1 silent " << silent << " s (STRATA_TIMEOUT " << T
                << ")\n";
      EXPECT_GE(silent, 0.8 * T) << "rank 1 was left out before the timeout";
      EXPECT_LE(took, T + 1.0);
    }
  }
}

// Time to recover: from the SIGKILL of a random rank (mid loop of 256 KiB all_reduces) to
// the last survivor holding its new communicator, at 4 and 8 ranks (RELIABILITY_TRIALS
// each; docs/reliability.md has a longer run's figures).
TEST(Shrink, TimeToRecover) {
  std::mt19937 rng(std::random_device{}());
  for (int n : {4, 8}) {
    std::vector<double> times;
    for (int t = 0; t < trials(); ++t) {
      const int victim = std::uniform_int_distribution<int>(0, n - 1)(rng);
      const int ms = std::uniform_int_distribution<int>(50, 300)(rng);
      Job j = spawn({STRATA_SHRINK_WORKER_PATH, "killed"}, n,
                    {{"STRATA_TIMEOUT", "20"}, {"SHRINK_KILL", std::to_string(victim)}, {"SHRINK_KILL_MS", std::to_string(ms)}},
                    {}, 90);
      std::vector<int> members;
      for (int r = 0; r < n; ++r)
        if (r != victim) members.push_back(r);
      const double last = expect_survivors(j, members);
      times.push_back(last - marker_time(j.ranks[victim], "KILLING"));
      if (HasFailure()) return;
    }
    std::sort(times.begin(), times.end());
    std::cout << n << " ranks, " << times.size() << " trials: from the kill to the last survivor's new communicator "
              << "median " << times[times.size() / 2] << " s, slowest " << times.back() << " s\n";
    EXPECT_LT(times.back(), 5.0) << "a timeout was waited for";
  }
}

TEST(Shrink, CApi) {
  Job j = spawn({C_SHRINK_WORKER_PATH}, kRanks, {{"STRATA_TIMEOUT", "20"}, {"SHRINK_KILL", "2"}}, {}, 60);
  EXPECT_EQ(j.ranks[2].term_signal, SIGKILL) << j.dump();
  for (int r : {0, 1, 3}) {
    const ProcResult& p = j.ranks[r];
    std::cout << "rank " << r << ": " << marker_line(p, "C-SHRINK") << "\n";
    EXPECT_TRUE(p.exited && p.exit_code == 0) << "rank " << r << ": " << p.describe() << "\n" << j.dump();
    EXPECT_NE(marker_line(p, "C-SHRINK").find("ok=1"), std::string::npos) << j.dump();
  }
}

}  // namespace
