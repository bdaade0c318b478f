// gloo-perf: the same benchmark and table as strata-perf, over Gloo's algorithms.
//   strata-run -n 4 gloo-perf all_reduce -b 8 -e 64M -f 2 -c 1      (GLOO_PERF_ALGO=ring|ring_chunked|halving_doubling)
#include "gloo_backend.hpp"
#include "tool_main.hpp"

int main(int argc, char** argv) {
  return perf::tool_main(argc, argv, {"gloo-perf", PERF_TOOL_VERSION, ""},
                         [](const perf::Options&, int) -> std::unique_ptr<perf::Backend> {
                           return std::make_unique<perf::GlooBackend>();
                         });
}
