// strata-perf end to end under strata-run: the point-to-point patterns on 3 ranks, where
// the ring shift (sendrecv) and the chain without wrap-around (pipeline) differ at both
// ends. The tool validates each result against its serial reference (-c 1) and prints
// the verdict in its footer.
#include <gtest/gtest.h>

#include <string>

#include "launcher_process.hpp"

namespace {

using launcher_test::contains;
using launcher_test::run_launcher;

void expect_validated_run(const std::string& coll, const std::string& transport) {
  const auto r = run_launcher({"-n", "3", "--no-prefix", STRATA_PERF_PATH, coll, "-b", "8", "-e", "256K", "-f",
                               "8", "-n", "3", "-w", "1", "-c", "1"},
                              {"STRATA_TRANSPORT=" + transport});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "# Out of bounds values : 0 OK")) << r.out;
  EXPECT_TRUE(contains(r.out, "262144")) << "the largest size is missing:\n" << r.out;
}

TEST(PerfTool, SendrecvValidatesOnThreeRanks) { expect_validated_run("sendrecv", "shm"); }
TEST(PerfTool, PipelineValidatesOnThreeRanks) { expect_validated_run("pipeline", "shm"); }
TEST(PerfTool, PipelineValidatesOverTcp) { expect_validated_run("pipeline", "tcp"); }

}  // namespace
