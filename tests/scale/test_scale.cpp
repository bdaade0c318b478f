// 64 ranks, as a small cluster runs them: 8 emulated hosts of 8 ranks (strata-run --hosts,
// as root), else one host over tcp. Each rank runs strata-scale-probe: a checked
// all_reduce and a barrier, then what it holds beside docs/architecture.md's formulas
// ("What a rank holds"), which rank 0 reports as one JSON line.
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_process.hpp"

namespace {

constexpr int kRanks = 64, kPerHost = 8;

bool can_emulate_hosts() { return geteuid() == 0; }  // strata-run --hosts needs CAP_NET_ADMIN

// strata-run's arguments for the job's shape, then the probe and its arguments.
std::vector<std::string> job(const std::vector<std::string>& probe_args, bool keep_going = false) {
  std::vector<std::string> a = {"-n", std::to_string(kRanks)};
  if (keep_going) a.push_back("--keep-going");
  if (can_emulate_hosts()) a.insert(a.end(), {"--hosts", std::to_string(kRanks / kPerHost), "--link-rate", "10gbit"});
  a.push_back("--");
  a.push_back(STRATA_SCALE_PROBE_PATH);
  a.insert(a.end(), probe_args.begin(), probe_args.end());
  return a;
}

long long field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": (-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

// One job; returns rank 0's report line.
std::string run_probe(const std::vector<std::string>& env) {
  auto r = launcher_test::start_launcher(job({}), env).finish(240);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0);
  std::smatch m;
  const std::string out = r.out;
  if (!std::regex_search(out, m, std::regex("\\[0\\] (\\{\"ranks\".*\\})"))) {
    ADD_FAILURE() << "no report from rank 0\n" << out.substr(out.size() > 4000 ? out.size() - 4000 : 0);
    return "";
  }
  std::cout << m[1] << "\n";
  return m[1];
}

void check_report(const std::string& report, bool formula) {
  EXPECT_EQ(field(report, "ranks"), kRanks) << report;
  EXPECT_EQ(field(report, "all_reduce_wrong"), 0) << report;
  EXPECT_LE(field(report, "fds_max"), 64) << report;
  // A rank of a hierarchical job connects its host's ranks, a few across hosts, and its
  // two ring neighbours: far fewer than the 63 of a full mesh.
  EXPECT_LE(field(report, "control_peers_max"), kPerHost - 1 + 2 + 2 * 3 + 2) << report;
  if (formula) EXPECT_NE(report.find("\"fds_formula_holds\": true"), std::string::npos) << report;
  EXPECT_NE(report.find("\"segments_formula_holds\": true"), std::string::npos) << report;
}

}  // namespace

TEST(Scale, SixtyFourRanksStartAndHoldWhatTheFormulasSay) {
  check_report(run_probe(can_emulate_hosts() ? std::vector<std::string>{} : std::vector<std::string>{"STRATA_TRANSPORT=tcp"}),
               true);
}

TEST(Scale, SixtyFourRanksOverUcx) {
  if (!can_emulate_hosts()) GTEST_SKIP() << "UCX between hosts needs emulated hosts (root)";
  // UCX keeps descriptors of its own per worker and endpoint: the formula is tcp's and shm's.
  check_report(run_probe({"STRATA_TRANSPORT=ucx"}), false);
}

// A rank that dies once the job is created: every other rank's call fails naming it, over
// the connections that exist (no rank is connected to all the others).
TEST(Scale, AKilledRankIsNamedByEverySurvivor) {
  constexpr int kVictim = 37;
  auto r = launcher_test::start_launcher(job({"--kill", std::to_string(kVictim)}, true), {"STRATA_TIMEOUT=30"})
               .finish(240);
  int named = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank == kVictim) continue;
    const std::string mine = "[" + std::to_string(rank) + "] NAMED " + std::to_string(kVictim) + " after";
    if (r.out.find(mine) != std::string::npos) ++named;
    else ADD_FAILURE() << "rank " << rank << " did not name rank " << kVictim;
  }
  EXPECT_EQ(named, kRanks - 1) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
  double slowest = 0;
  const std::regex after("NAMED [0-9]+ after ([0-9.]+) s");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), after); it != std::sregex_iterator(); ++it)
    slowest = std::max(slowest, std::stod((*it)[1]));
  std::cout << named << " survivors named rank " << kVictim << ", the last after " << slowest << " s\n";
  EXPECT_LT(slowest, 30.0) << "a survivor waited for STRATA_TIMEOUT";
}
