// Runs strata-test-worker under strata-run for several world sizes and configurations
// (transport, algorithm, tiny shared-memory ring and chunks) and asserts that every rank
// finished with all cases passed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "worker_job.hpp"

using strata_test::expect_worker_job_passes;

namespace {

struct Config {
  std::string name;
  int n;
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  double deadline_s;
  std::vector<std::string> launch = {};  // extra strata-run options (e.g. an emulated cluster)
};

// Whether this process may create network namespaces (root with CAP_NET_ADMIN).
bool can_make_namespaces() {
  if (geteuid() != 0) return false;
  std::string name = "strata-probe-" + std::to_string(getpid());
  bool ok = std::system(("ip netns add " + name + " 2>/dev/null").c_str()) == 0;
  if (ok) (void)std::system(("ip netns del " + name + " 2>/dev/null").c_str());
  return ok;
}

std::ostream& operator<<(std::ostream& o, const Config& c) { return o << c.name; }

class Collectives : public ::testing::TestWithParam<Config> {};

TEST_P(Collectives, AllRanksPass) {
  const Config& c = GetParam();
  std::map<std::string, std::string> env = c.env;
  env["STRATA_TIMEOUT"] = "60";
  if (!c.launch.empty() && !can_make_namespaces())
    GTEST_SKIP() << "cannot create network namespaces here (needs root and CAP_NET_ADMIN): emulated cluster not tested";
  expect_worker_job_passes(c.name, c.n, env, c.launch, c.args, c.deadline_s);
}

std::vector<Config> configs() {
  std::vector<Config> v;
  const std::vector<int> sizes{2, 3, 4, 7};
  auto nn = [](int n) { return "n" + std::to_string(n); };
  // Default transport (shared memory on one host): the full small-size matrix plus
  // 65536 +- 1 elements.
  for (int n : sizes) v.push_back({"default_" + nn(n), n, {}, {"--quick", "--medium"}, 400});
  // fp8 (out of the default matrix, for time): every collective and op, small sizes.
  for (int n : {2, 3, 4}) v.push_back({"fp8_" + nn(n), n, {}, {"--quick", "--types=f8e4m3,f8e5m2", "--no-misc"}, 400});
  // 64 MiB float32 sum for every collective.
  for (int n : {2, 4}) v.push_back({"big_" + nn(n), n, {}, {"--big"}, 400});
  // Two-rank all-reduces of >= 4 MiB run in 1 MiB pieces: sizes that do not divide evenly.
  v.push_back({"pieces_n2", 2, {}, {"--sizes=1048579,2500001", "--colls=all_reduce", "--types=float,bfloat16,int64", "--ops=sum,max,avg"}, 400});
  // TCP transport (65536 +- 1 elements are striped over the data sockets).
  for (int n : sizes) {
    std::vector<std::string> args{"--quick"};
    if (n == 3 || n == 4) args.push_back("--medium");
    v.push_back({"tcp_" + nn(n), n, {{"STRATA_TRANSPORT", "tcp"}}, args, 400});
  }
  v.push_back({"tcp_big_n3", 3, {{"STRATA_TRANSPORT", "tcp"}}, {"--big", "--colls=all_reduce,all_gather,reduce_scatter"}, 400});
  // TCP with small staging buffers, chunks and an odd socket count.
  v.push_back({"tcp_tiny_n3", 3,
               {{"STRATA_TRANSPORT", "tcp"}, {"STRATA_TCP_NSOCKS", "3"}, {"STRATA_TCP_STAGING_BYTES", "4096"},
                {"STRATA_CHUNK_BYTES", "4096"}},
               {"--quick", "--medium", "--no-misc"}, 400});
  // Each algorithm forced (a collective it does not implement falls back to the default).
  // At 3 ranks also 65536 +- 1 elements (above the sizes where the default picks them).
  for (std::string algo : {"ring", "tree", "recursive_doubling", "direct"})
    for (int n : sizes) {
      std::vector<std::string> args{"--quick"};
      if (n == 3) args.push_back("--medium");
      v.push_back({"algo_" + algo + "_" + nn(n), n, {{"STRATA_ALGO", algo}}, args, 400});
    }
  for (int n : {3, 4, 7})
    v.push_back({"algo_rabenseifner_" + nn(n), n, {{"STRATA_ALGO", "rabenseifner"}}, {"--quick", "--medium", "--colls=all_reduce"}, 400});
  v.push_back({"algo_recursive_doubling_medium_n7", 7, {{"STRATA_ALGO", "recursive_doubling"}},
               {"--medium", "--colls=all_reduce,all_gather"}, 400});
  // Tiny shared-memory ring and chunks: wrap-around and many chunks per message.
  const std::map<std::string, std::string> tiny{{"STRATA_SHM_RING_BYTES", "4096"}, {"STRATA_CHUNK_BYTES", "4096"}};
  // At 7 ranks the small sizes only: 65536 +- 1 elements through the 4 KiB FIFOs at 2-4
  // ranks run the same wrap-around code, and at 7 ranks on 2 cores took a minute of waits.
  for (int n : sizes) {
    std::vector<std::string> args{"--quick"};
    if (n < 7) args.push_back("--medium");
    v.push_back({"tinyring_" + nn(n), n, tiny, args, 400});
  }
  // ... with the chain broadcast/reduce (ring) at small sizes, whose chunk boundaries
  // are the 4096-byte sizes of --quick, and with the tree at 65536 +- 1 elements.
  for (int n : {3, 7}) {
    auto env = tiny;
    env["STRATA_ALGO"] = "ring";
    v.push_back({"tinyring_ring_" + nn(n), n, env, {"--quick", "--no-misc"}, 400});
  }
  {
    auto env = tiny;
    env["STRATA_ALGO"] = "tree";
    v.push_back({"tinyring_tree_n4", 4, env, {"--medium", "--colls=broadcast,reduce"}, 400});
  }
  // Emulated nodes (tcp between them) and islands: hierarchical plans forced, on even and
  // uneven groups (7 ranks as nodes of 3+3+1), and the tuner's own choice.
  for (auto [name, n, spec] : {std::tuple{"hier_node2_n4", 4, "node:2"}, std::tuple{"hier_node3_n7", 7, "node:3"},
                               std::tuple{"hier_island_n7", 7, "node:2,island:2"}, std::tuple{"hier_node2_n3", 3, "node:2"}})
    v.push_back({name, n, {{"STRATA_HIERARCHY", spec}, {"STRATA_ALGO", "hierarchical"}}, {"--quick", "--medium"}, 400});
  // Every receive written with non-temporal stores (normally only those >= 1 MiB):
  // unaligned heads and tails, FIFO wrap-around, streamed reductions.
  v.push_back({"stream_all_n3", 3, {{"STRATA_SHM_STREAM_BYTES", "1"}, {"STRATA_SHM_RING_BYTES", "8192"}}, {"--quick", "--medium"}, 400});
  // Zero-copy (docs/transports.md): ranks allocate with strata::alloc, register memfd
  // mappings, or use private memory, mixed, so every pair meets both sides of the per-message
  // header; a low threshold reaches the quick sizes, a small FIFO wraps the headers.
  v.push_back({"zerocopy_mixed_n2", 2, {{"STRATA_SHM_ZEROCOPY_BYTES", "512"}}, {"--quick", "--medium", "--alloc=strata,user"}, 400});
  v.push_back({"zerocopy_mixed_n3", 3, {{"STRATA_SHM_ZEROCOPY_BYTES", "512"}, {"STRATA_SHM_RING_BYTES", "8192"}},
               {"--quick", "--medium", "--no-misc", "--alloc=registered,strata,user"}, 400});
  v.push_back({"zerocopy_mixed_n4", 4, {}, {"--medium", "--alloc=user,registered,strata,strata"}, 400});
  v.push_back({"zerocopy_big_n2", 2, {}, {"--big", "--colls=all_reduce,reduce_scatter", "--alloc=registered,strata"}, 400});
  v.push_back({"hier_tuned_n4", 4, {{"STRATA_HIERARCHY", "node:2"}}, {"--quick", "--medium"}, 400});
  // A real emulated cluster: 2 network namespaces joined by a shaped veth (tcp across,
  // shared memory inside), with the tuner's choices and the hierarchical plans forced.
  v.push_back({"emulated_cluster_n4", 4, {}, {"--quick"}, 400, {"--hosts", "2", "--link-rate", "1gbit"}});
  v.push_back({"emulated_cluster_hier_n5", 5, {{"STRATA_ALGO", "hierarchical"}}, {"--quick"}, 400, {"--hosts", "2"}});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Run, Collectives, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return i.param.name; });

// The worker's --device mode (worker_checks.hpp, DeviceMode) on the emulated backend (or
// the one STRATA_DEVICE names: tools/gpu-check runs these on cuda): every
// collective x type x op at --quick's sizes (0, 1, 7, 1001, a 4 KiB chunk +-1 elements), in
// and out of place, each call's inputs written just before it and its output read just
// after it on its stream, plus point-to-point and groups on device buffers. One rank runs
// the device executor alone; more ranks move device buffers over the IPC link on one
// host and by staging between the emulated hosts of --hosts 2, and the matrix narrows as
// ranks grow (time: each call is stream-ordered).
class DeviceCollectives : public ::testing::TestWithParam<Config> {};

TEST_P(DeviceCollectives, AllRanksPass) {
  const Config& c = GetParam();
  std::map<std::string, std::string> env = c.env;
  env["STRATA_TIMEOUT"] = "60";
  env["STRATA_DEVICE"] = strata_test::device_under_test();
  if (!c.launch.empty() && !can_make_namespaces())
    GTEST_SKIP() << "cannot create network namespaces here (needs root and CAP_NET_ADMIN): emulated cluster not tested";
  expect_worker_job_passes(c.name, c.n, env, c.launch, c.args, c.deadline_s);
}

std::vector<Config> device_configs() {
  const std::map<std::string, std::string> delays{{"STRATA_EMULATED_DELAY_US", "50"}};
  const std::vector<std::string> all{"--quick", "--device"};
  std::vector<Config> v;
  v.push_back({"device_n1", 1, {}, all, 200});
  v.push_back({"device_n1_delays", 1, delays, all, 200});
  v.push_back({"device_n2", 2, {}, all, 300});
  v.push_back({"device_n3", 3, {}, {"--quick", "--device", "--types=float,bfloat16,int32,uint8,f8e4m3"}, 300});
  v.push_back({"device_n4_delays", 4, delays, {"--quick", "--device", "--types=float,float16,int64,f8e5m2"}, 300});
  // Small chunks: many pieces per message, chunk boundaries at --quick's 4 KiB sizes.
  v.push_back({"device_chunks_n3", 3, {{"STRATA_CHUNK_BYTES", "4096"}},
               {"--quick", "--device", "--types=float,int8", "--no-misc"}, 300});
  // Buffers inside a program's own cudaMalloc (PyTorch's): staged through Strata's memory
  // around each call (core/call_staging.hpp), in place and out.
  v.push_back({"device_foreign_n3", 3, delays, {"--quick", "--device", "--foreign", "--types=float,int32"}, 300});
  // Two emulated hosts (network namespaces): staging across, IPC inside.
  v.push_back({"device_hosts2_n4", 4, {}, {"--quick", "--device", "--types=float,bfloat16,int32"}, 300, {"--hosts", "2"}});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Run, DeviceCollectives, ::testing::ValuesIn(device_configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return i.param.name; });

}  // namespace
