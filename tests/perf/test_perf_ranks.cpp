// strata-perf end to end under strata-run: the point-to-point patterns on 3 ranks, where
// the ring shift (sendrecv) and the chain without wrap-around (pipeline) differ at both
// ends. The tool validates each result against its serial reference (-c 1) and prints
// the verdict in its footer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher_process.hpp"

namespace {

using launcher_test::contains;
using launcher_test::run_launcher;

std::string expect_validated_run(const std::string& coll, const std::string& transport,
                                 const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv{"-n", "3", "--no-prefix", STRATA_PERF_PATH, coll, "-b", "8", "-e", "256K", "-f",
                                "8", "-n", "3", "-w", "1", "-c", "1"};
  argv.insert(argv.end(), more.begin(), more.end());
  const auto r = run_launcher(argv, {"STRATA_TRANSPORT=" + transport});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "# Out of bounds values : 0 OK")) << r.out;
  EXPECT_TRUE(contains(r.out, "262144")) << "the largest size is missing:\n" << r.out;
  return r.out;
}

TEST(PerfTool, SendrecvValidatesOnThreeRanks) { expect_validated_run("sendrecv", "shm"); }
TEST(PerfTool, PipelineValidatesOnThreeRanks) { expect_validated_run("pipeline", "shm"); }
TEST(PerfTool, PipelineValidatesOverTcp) { expect_validated_run("pipeline", "tcp"); }

// --api nccl: every pattern through the nccl* functions of the libnccl.so.2 found at run
// time, which in the build tree is Strata's.
TEST(PerfTool, EveryCollectiveValidatesThroughTheNcclApi) {
  for (const char* coll : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
                           "sendrecv", "pipeline"}) {
    const std::string out = expect_validated_run(coll, "shm", {"--api", "nccl", "-o", "all"});
    EXPECT_TRUE(contains(out, "lib/nccl/libnccl.so.2, ncclGetVersion 22809")) << out;
    EXPECT_TRUE(contains(out, "backend=nccl")) << out;
  }
}

}  // namespace
