// Runs strata-test-worker as a job under strata-run and checks that it passed: strata-run
// exited 0, every rank ran and reported, and no rank counted a failure. Needs
// STRATA_RUN_PATH and STRATA_WORKER_PATH defined by the test's build.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tests/common/process.hpp"

namespace strata_test {

// `launch`: strata-run options (e.g. --hosts 2); `args`: the worker's.
inline void expect_worker_job_passes(const std::string& name, int n, const std::map<std::string, std::string>& env,
                                     const std::vector<std::string>& launch, const std::vector<std::string>& args,
                                     double deadline_s) {
  std::vector<std::string> argv{sibling_program(STRATA_RUN_PATH), "-n", std::to_string(n)};
  argv.insert(argv.end(), launch.begin(), launch.end());
  argv.push_back("--");
  argv.push_back(sibling_program(STRATA_WORKER_PATH));
  argv.insert(argv.end(), args.begin(), args.end());
  std::string cmd;
  for (auto& [k, v] : env) cmd += k + "=" + v + " ";
  for (auto& a : argv) cmd += a + " ";
  double t0 = now_s();
  auto r = run_one(argv, env, deadline_s);
  double dt = now_s() - t0;
  auto summaries = lines_containing(r.out, "strata-test-worker rank");
  for (auto& l : summaries) std::cout << l << "\n";
  std::cout << "[" << name << "] " << r.describe() << ", wall " << dt << " s\n";
  ASSERT_TRUE(r.exited && r.exit_code == 0 && !r.killed_by_deadline)
      << "command: " << cmd << "\n" << r.describe() << "\noutput:\n" << tail(r.out);
  // Every rank must have run and reported: a launcher that exits 0 without running the
  // workers does not pass.
  ASSERT_EQ(static_cast<int>(summaries.size()), n) << "command: " << cmd << "\noutput:\n" << tail(r.out);
  for (auto& l : summaries) EXPECT_NE(l.find(" 0 failed"), std::string::npos) << l;
}

}  // namespace strata_test
