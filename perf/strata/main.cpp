// strata-perf: nccl-tests' benchmark table for Strata's collectives.
//   strata-run -n 4 strata-perf all_reduce -b 8 -e 64M -f 2 -c 1
//   mpirun -np 4 strata-perf all_gather -b 1K -e 16M -f 4      (or srun, torchrun)
//   strata-perf broadcast -b 1M -e 1M                          (one rank)
//   strata-run -n 4 strata-perf all_reduce --api nccl          (through libnccl.so.2's nccl*)
//   strata-run -n 2 strata-perf all_reduce --device cuda       (device buffers, on a stream)
//   strata-run -n 2 strata-perf all_reduce --alloc strata      (host buffers peers read in place)
//   strata-perf all_reduce -t 4 --device cuda                  (4 ranks as threads: one CUDA context)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap.hpp"
#include "nccl_backend.hpp"
#include "strata_backend.hpp"
#include "tool_main.hpp"

namespace {

constexpr const char* kApiUsage =
    "\t[--api <strata/nccl>] (the functions timed: Strata's C++ API, or the nccl* functions of the\n"
    "\t libnccl.so.2 the dynamic linker finds, Strata's unless LD_LIBRARY_PATH names NVIDIA's; default strata)\n"
    "\t[--device <host/cuda/emulated>] (where the buffers live: host memory, or device memory of that device\n"
    "\t backend (STRATA_DEVICE), each call then on a stream and timed to that stream's synchronisation; default host)\n"
    "\t[--alloc <user/strata>] (host buffers: private memory (aligned_alloc), or strata::alloc(host), which the\n"
    "\t node's other ranks read in place (zero-copy on shared memory); default user)\n";

}  // namespace

int main(int argc, char** argv) {
  // --api is strata-perf's own flag (the other drivers have one library each): taken out
  // here, anywhere on the line, before nccl-tests' flags are parsed.
  std::string api = "strata", device = "host", alloc = "user";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--api" && i + 1 < argc) api = argv[++i];
    else if (a.rfind("--api=", 0) == 0) api = a.substr(6);
    else if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a.rfind("--device=", 0) == 0) device = a.substr(9);
    else if (a == "--alloc" && i + 1 < argc) alloc = argv[++i];
    else if (a.rfind("--alloc=", 0) == 0) alloc = a.substr(8);
    else rest.push_back(argv[i]);
  }
  if (api != "strata" && api != "nccl") {
    std::fprintf(stderr, "strata-perf: error: --api %s: expected strata or nccl\n", api.c_str());
    return 2;
  }
  if (device != "host" && device != "cuda" && device != "emulated") {
    std::fprintf(stderr, "strata-perf: error: --device %s: expected host, cuda or emulated\n", device.c_str());
    return 2;
  }
  if (alloc != "user" && alloc != "strata") {
    std::fprintf(stderr, "strata-perf: error: --alloc %s: expected user or strata\n", alloc.c_str());
    return 2;
  }
  if (alloc != "user" && (device != "host" || api != "strata")) {
    std::fprintf(stderr, "strata-perf: error: --alloc %s: only with host buffers and --api strata\n", alloc.c_str());
    return 2;
  }
  if (device != "host" && api != "strata") {
    std::fprintf(stderr, "strata-perf: error: --device %s: only with --api strata\n", device.c_str());
    return 2;
  }
  // The device backend is chosen once per process, from STRATA_DEVICE: set before any
  // device call (a GPU-less machine then fails at the first one, saying why).
  if (device != "host") setenv("STRATA_DEVICE", device.c_str(), 1);
  return perf::tool_main(static_cast<int>(rest.size()), rest.data(),
                         {"strata-perf", PERF_TOOL_VERSION, kApiUsage, /*threads=*/true},
                         [&api, &device, &alloc](const perf::Options& o, int thread) -> std::unique_ptr<perf::Backend> {
                           strata::Comm comm = perf::join_job(thread, o.threads);
                           if (api == "nccl") return std::make_unique<perf::NcclBackend>(std::move(comm));
                           return std::make_unique<perf::StrataBackend>(std::move(comm), device != "host",
                                                                        alloc == "strata");
                         });
}
