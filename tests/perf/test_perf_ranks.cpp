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

// -t: ranks as threads of one process, each with its communicator (nccl-tests' -t); by
// hand (one process, three threads), under strata-run (two processes of two threads:
// four ranks), and on device buffers of the emulated backend (its threads share one
// backend, as ranks as threads share one CUDA context).
TEST(PerfTool, RanksAsThreadsValidate) {
  const std::vector<std::string> small{"-b", "8", "-e", "64K", "-f", "32", "-n", "3", "-w", "1", "-c", "1"};
  auto check = [](const launcher_test::ProcResult& r, const char* ranks) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "# Out of bounds values : 0 OK")) << r.out;
    EXPECT_TRUE(contains(r.out, ranks)) << r.out;
    EXPECT_TRUE(contains(r.out, "65536")) << "the largest size is missing:\n" << r.out;
  };
  std::vector<std::string> one{"-n", "1", "--no-prefix", STRATA_PERF_PATH, "reduce_scatter", "-t", "3"};
  one.insert(one.end(), small.begin(), small.end());
  check(run_launcher(one), "3 ranks");
  std::vector<std::string> two{"-n", "2", "--no-prefix", STRATA_PERF_PATH, "all_reduce", "-t", "2"};
  two.insert(two.end(), small.begin(), small.end());
  check(run_launcher(two), "4 ranks");
  std::vector<std::string> dev{"-n", "1", "--no-prefix", STRATA_PERF_PATH, "all_reduce", "-t", "2", "--device", "emulated"};
  dev.insert(dev.end(), small.begin(), small.end());
  check(run_launcher(dev), "[emulated] emulated, 2 ranks");
}

}  // namespace
