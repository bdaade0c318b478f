// The C API across processes: c_api_worker (compiled as C) under strata-run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/process.hpp"

using namespace strata_test;

namespace {

void run_c_worker(int n) {
  std::vector<std::string> argv{STRATA_RUN_PATH, "-n", std::to_string(n), "--", C_API_WORKER_PATH};
  auto r = run_one(argv, {{"STRATA_TIMEOUT", "60"}}, 120);
  auto summaries = lines_containing(r.out, "c_api_worker rank");
  for (auto& l : summaries) std::cout << l << "\n";
  ASSERT_TRUE(r.exited && r.exit_code == 0 && !r.killed_by_deadline)
      << r.describe() << "\noutput:\n" << tail(r.out);
  ASSERT_EQ(static_cast<int>(summaries.size()), n) << tail(r.out);
  for (auto& l : summaries) EXPECT_NE(l.find(" 0 failed"), std::string::npos) << l;
}

TEST(CApiMulti, TwoRanks) { run_c_worker(2); }
TEST(CApiMulti, ThreeRanks) { run_c_worker(3); }

}  // namespace
