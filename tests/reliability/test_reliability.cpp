// One verdict on every rank: a call that one rank gets wrong, or that the ranks disagree
// on, must fail on every rank (never leave the ranks out of step, never return wrong
// values), and under STRATA_CHECK=1 leave the communicator usable. Three ranks spawned
// directly (tests/failure/failure_job.hpp); each rank prints a STEP line per call.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "failure_job.hpp"

using namespace strata_test;

namespace {

constexpr int kRanks = 3;

struct Step {
  std::string outcome, cls, kind, peer, msg;
};

// Every rank's STEP lines by name.
std::vector<std::map<std::string, Step>> run_mode(const std::string& mode, bool check) {
  std::map<std::string, std::string> env{{"STRATA_TIMEOUT", "20"}};
  if (check) env["STRATA_CHECK"] = "1";
  Job j = spawn({STRATA_RELIABILITY_WORKER_PATH, mode}, kRanks, env, {}, 60);
  std::vector<std::map<std::string, Step>> steps(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const ProcResult& p = j.ranks[r];
    EXPECT_FALSE(p.killed_by_deadline) << mode << ": rank " << r << " hung\n" << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code == 0) << mode << ": rank " << r << ": " << p.describe() << "\n" << j.dump();
    for (const std::string& l : lines_containing(p.err, "STEP name=")) {
      if (l.rfind("STEP ", 0) != 0) continue;
      steps[r][field(l, "name")] = {field(l, "outcome"), field(l, "class"), field(l, "kind"), field(l, "peer"),
                                    field(l, "msg")};
      std::cout << mode << (check ? " (check)" : "") << " rank " << r << ": " << l << "\n";
    }
  }
  return steps;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// No step of any rank returned wrong values.
void expect_nothing_wrong(const std::vector<std::map<std::string, Step>>& steps) {
  for (int r = 0; r < kRanks; ++r)
    for (auto& [name, s] : steps[r]) EXPECT_NE(s.outcome, "wrong") << "rank " << r << " " << name << " returned wrong values";
}

// Without STRATA_CHECK: rank 1 refuses its own call; the others fail the same call naming
// it, and the communicator can only be destroyed (the next call throws everywhere).
void expect_refused_everywhere(const std::string& mode, const std::string& what) {
  auto steps = run_mode(mode, false);
  expect_nothing_wrong(steps);
  for (int r = 0; r < kRanks; ++r) {
    const Step& first = steps[r]["first"];
    ASSERT_EQ(first.outcome, "error") << mode << ": rank " << r << " did not fail the call";
    EXPECT_EQ(first.kind, "invalid_argument") << mode << ": rank " << r << ": " << first.msg;
    if (r == 1) {
      EXPECT_EQ(first.cls, "InvalidArgument") << first.msg;
      EXPECT_TRUE(has(first.msg, what)) << first.msg;
    } else {
      EXPECT_EQ(first.cls, "PeerError") << first.msg;
      EXPECT_EQ(first.peer, "1") << first.msg;
      EXPECT_TRUE(has(first.msg, "rank 1 refused its arguments")) << first.msg;
    }
    EXPECT_EQ(steps[r]["all_reduce"].outcome, "error") << mode << ": rank " << r << " ran on after a refused call";
  }
}

// Under STRATA_CHECK: every rank fails the call with InvalidArgument, `said` in its
// message, and the next all_reduce is right everywhere. `involved`: the ranks that made
// the call.
void expect_checked(const std::string& mode, const std::vector<std::string>& said, std::vector<int> involved = {0, 1, 2}) {
  auto steps = run_mode(mode, true);
  expect_nothing_wrong(steps);
  for (int r : involved) {
    const Step& first = steps[r]["first"];
    ASSERT_EQ(first.outcome, "error") << mode << ": rank " << r << " did not fail the call";
    EXPECT_EQ(first.cls, "InvalidArgument") << mode << ": rank " << r << ": " << first.msg;
    for (const std::string& s : said) EXPECT_TRUE(has(first.msg, s)) << mode << ": rank " << r << ": " << first.msg;
  }
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(steps[r]["all_reduce"].outcome, "ok") << mode << ": rank " << r << ": the communicator did not stay usable: "
                                                    << steps[r]["all_reduce"].msg;
}

}  // namespace

// Issue 20, defect 2: overlapping buffers were refused on the root only; the other ranks
// went on and the next all_reduce returned wrong values everywhere.
TEST(OneVerdict, OverlapOnTheRootFailsEveryRank) { expect_refused_everywhere("overlap", "overlap but are not in place"); }
TEST(OneVerdict, NullBufferOnOneRankFailsEveryRank) { expect_refused_everywhere("null", "recv buffer is null"); }

TEST(CheckMode, OneRanksRefusalFailsTheCallEverywhereAndTheCommunicatorGoesOn) {
  expect_checked("overlap", {"rank 1 refused its arguments"});
  expect_checked("null", {"rank 1 refused its arguments (a null buffer)"});
}

TEST(CheckMode, DifferentCountsCollectivesAndRootsAreNamed) {
  expect_checked("count", {"ranks 0, 2 all_reduce of 1024 float (sum)", "rank 1 all_reduce of 1000 float (sum)"});
  expect_checked("collective", {"ranks 0, 2 all_reduce of 1024 float (sum)", "rank 1 broadcast of 4096 float from root 0"});
  expect_checked("root", {"ranks 0-1 broadcast of 4096 float from root 0", "rank 2 broadcast of 4096 float from root 1"});
}

TEST(CheckMode, SendAndReceiveOfDifferentSizesFailBothEnds) {
  expect_checked("p2p_size", {"rank 0 posted 1 send (first 4096 B)", "rank 1 posted no sends and 1 receive (first 4000 B)"},
                 {0, 1});
}

// A send against a collective cannot be resolved between the two: the communicator fails
// on every rank, naming what each called, and nobody hangs.
TEST(CheckMode, SendAgainstACollectiveFailsEveryRank) {
  auto steps = run_mode("p2p_vs_coll", true);
  expect_nothing_wrong(steps);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(steps[r]["first"].outcome, "error") << "rank " << r;
  EXPECT_TRUE(has(steps[0]["first"].msg, "rank 1, which called all_reduce of 1024 float")) << steps[0]["first"].msg;
  EXPECT_TRUE(has(steps[1]["first"].msg, "send/recv")) << steps[1]["first"].msg;
  EXPECT_EQ(steps[2]["first"].cls, "PeerError") << steps[2]["first"].msg;
  EXPECT_TRUE(has(steps[2]["first"].msg, "rank 0 found that the ranks called different operations")) << steps[2]["first"].msg;
}

// Defect 6: a negative color other than kSplitNoColor is refused on every rank, which
// sees every rank's color; the communicator stays usable, with or without STRATA_CHECK.
TEST(Split, NegativeColorOtherThanNoColorIsRefusedEverywhere) {
  for (bool check : {false, true}) {
    auto steps = run_mode("split_color", check);
    for (int r = 0; r < kRanks; ++r) {
      const Step& first = steps[r]["first"];
      EXPECT_EQ(first.outcome, "error") << "rank " << r;
      EXPECT_EQ(first.cls, "InvalidArgument") << first.msg;
      EXPECT_TRUE(has(first.msg, "rank 1 passed -2")) << first.msg;
      EXPECT_EQ(steps[r]["all_reduce"].outcome, "ok") << "rank " << r << ": " << steps[r]["all_reduce"].msg;
    }
  }
}
