// mpi-perf: the same benchmark and table as strata-perf, over OpenMPI's collectives.
//   mpirun -np 4 mpi-perf all_reduce -b 8 -e 64M -f 2 -c 1
#include "mpi_backend.hpp"
#include "tool_main.hpp"

int main(int argc, char** argv) {
  return perf::tool_main(argc, argv, {"mpi-perf", PERF_TOOL_VERSION, ""},
                         [](const perf::Options&, int) -> std::unique_ptr<perf::Backend> {
                           return std::make_unique<perf::MpiBackend>();
                         });
}
