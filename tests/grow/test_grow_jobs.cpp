// Comm::grow with processes: the existing ranks are a job of their own (spawned directly,
// as strata-run would stop survivors), the newcomers separate processes that find the door
// through a file. Every rank of a grown communicator must print the all_reduce formula's
// sum for its size; a failed grow must leave the old communicator usable.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "failure_job.hpp"

namespace {

struct Outcome {
  std::vector<strata_test::ProcResult> existing, newcomers;
  std::string all;
};

// `n` existing ranks with `extra` flags, and one newcomer process per entry of `newcomer_flags`.
Outcome run(int n, const std::vector<std::string>& extra, const std::vector<std::vector<std::string>>& newcomer_flags,
            const std::map<std::string, std::string>& env = {{"STRATA_TIMEOUT", "20"}}) {
  char dir[] = "/tmp/strata-grow-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  const std::string door = std::string(dir) + "/door";
  std::vector<std::string> argv = {GROW_WORKER_PATH, "existing", "--new", std::to_string(newcomer_flags.size()),
                                   "--door", door};
  argv.insert(argv.end(), extra.begin(), extra.end());
  strata_test::JobSpecs js = strata_test::job_specs(argv, n, env, {});
  std::vector<strata_test::Process> procs;
  for (const auto& spec : js.ranks) procs.emplace_back(spec);
  for (size_t k = 0; k < newcomer_flags.size(); ++k) {
    std::vector<std::string> nargv = {GROW_WORKER_PATH, "newcomer", "--key", std::to_string(100 + k), "--door", door};
    nargv.insert(nargv.end(), newcomer_flags[k].begin(), newcomer_flags[k].end());
    procs.emplace_back(strata_test::SpawnSpec{nargv, strata_test::make_env(env), false});
  }
  Outcome o;
  for (size_t i = 0; i < procs.size(); ++i) {
    strata_test::ProcResult r = procs[i].finish(90);
    o.all += "---- " + std::string(i < static_cast<size_t>(n) ? "rank " : "newcomer ") + std::to_string(i) + ": " +
             r.describe() + "\n" + r.out + r.err;
    (i < static_cast<size_t>(n) ? o.existing : o.newcomers).push_back(std::move(r));
  }
  strata::remove_job_segments(js.secret);
  std::system(("rm -rf " + std::string(dir)).c_str());
  return o;
}

// Every process that should be in the grown communicator says so, with the right sum.
void expect_grown(const Outcome& o, const std::vector<const strata_test::ProcResult*>& members) {
  const int n = static_cast<int>(members.size());
  std::vector<int> ranks;
  for (const strata_test::ProcResult* p : members) {
    EXPECT_TRUE(p->exited && p->exit_code == 0) << o.all;
    int rank = -1, size = 0, sum = 0;
    const auto lines = strata_test::lines_containing(p->out, "grown: ");
    ASSERT_EQ(lines.size(), 1u) << o.all;
    ASSERT_EQ(std::sscanf(lines[0].c_str(), "grown: rank %d of %d, sum %d", &rank, &size, &sum), 3) << lines[0];
    EXPECT_EQ(size, n);
    EXPECT_EQ(sum, n * (n + 1) / 2) << lines[0];
    ranks.push_back(rank);
  }
  std::sort(ranks.begin(), ranks.end());
  for (int r = 0; r < n; ++r) EXPECT_EQ(ranks[static_cast<size_t>(r)], r) << o.all;
}

TEST(GrowJobs, TwoRanksGrowToFour) {
  for (const std::vector<std::string>& api : {std::vector<std::string>{}, std::vector<std::string>{"--c-api"}}) {
    Outcome o = run(2, api, {api, api});
    std::vector<const strata_test::ProcResult*> all;
    for (const auto& p : o.existing) all.push_back(&p);
    for (const auto& p : o.newcomers) all.push_back(&p);
    expect_grown(o, all);
    for (const auto& p : o.existing)
      EXPECT_EQ(strata_test::lines_containing(p.out, "old communicator: sum 2").size(), 1u) << o.all;
    // The newcomers' keys (100, 101) put them after the existing ranks, in that order.
    EXPECT_NE(o.newcomers[0].out.find("grown: rank 2 of 4"), std::string::npos) << o.all;
    EXPECT_NE(o.newcomers[1].out.find("grown: rank 3 of 4"), std::string::npos) << o.all;
  }
}

// Rank 2 of 3 is SIGKILLed; the two others shrink, then grow with two newcomers to 4.
TEST(GrowJobs, AShrunkCommunicatorGrows) {
  Outcome o = run(3, {"--shrink-first"}, {{}, {}});
  EXPECT_EQ(o.existing[2].term_signal, SIGKILL) << o.all;
  for (int r : {0, 1}) EXPECT_NE(o.existing[r].out.find("shrunk to 2 ranks"), std::string::npos) << o.all;
  expect_grown(o, {&o.existing[0], &o.existing[1], &o.newcomers[0], &o.newcomers[1]});
}

// A newcomer that the grow has taken in dies before it connects: the grow fails on both
// existing ranks within STRATA_TIMEOUT, naming the rank it was to be, and their old
// communicator goes on.
TEST(GrowJobs, ANewcomerThatDiesDuringTheGrow) {
  const double t0 = strata_test::now_s();
  Outcome o = run(2, {}, {{"--vanish"}}, {{"STRATA_TIMEOUT", "3"}});
  const double took = strata_test::now_s() - t0;
  EXPECT_EQ(o.newcomers[0].term_signal, SIGKILL) << o.all;
  EXPECT_NE(o.newcomers[0].out.find("taken in by a grow"), std::string::npos) << o.all;
  for (const auto& p : o.existing) {
    EXPECT_TRUE(p.exited && p.exit_code == 0) << o.all;
    const auto failed = strata_test::lines_containing(p.out, "grow failed: ");
    ASSERT_EQ(failed.size(), 1u) << o.all;
    EXPECT_NE(failed[0].find("rank 2"), std::string::npos) << failed[0];
    EXPECT_EQ(strata_test::lines_containing(p.out, "old communicator: sum 2").size(), 1u) << o.all;
    std::cout << failed[0] << "\n";
  }
  EXPECT_LT(took, 30) << "the failed grow took " << took << " s";
}

}  // namespace
