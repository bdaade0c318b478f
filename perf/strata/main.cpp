// strata-perf: nccl-tests' benchmark table for Strata's collectives.
//   strata-run -n 4 strata-perf all_reduce -b 8 -e 64M -f 2 -c 1
//   mpirun -np 4 strata-perf all_gather -b 1K -e 16M -f 4      (or srun, torchrun)
//   strata-perf broadcast -b 1M -e 1M                          (one rank)
#include "bootstrap.hpp"
#include "strata_backend.hpp"
#include "tool_main.hpp"

int main(int argc, char** argv) {
  return perf::tool_main(argc, argv, {"strata-perf", PERF_TOOL_VERSION},
                         [](const perf::Options&) -> std::unique_ptr<perf::Backend> {
                           return std::make_unique<perf::StrataBackend>(perf::join_job());
                         });
}
