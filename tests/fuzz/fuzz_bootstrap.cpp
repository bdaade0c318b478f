// The bootstrap's bytes from other processes (core/bootstrap, ground/socket.cpp): the
// hello every connection starts with, and the table of every rank's info that the root
// sends each rank (and a split all-gathers), followed into what a communicator builds
// from it (the hierarchy from host identities, CPU oversubscription, shm or tcp).
//
// Input: a byte of options, a hello (sizeof(net::Hello) bytes), a byte for the rank
// count, then the table. Options plant the job's magic, secret and tag in the hello and
// terminate each info's strings, so inputs also get past those checks.
#include <cstring>

#include "algorithms/hierarchy.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/connector.hpp"
#include "tests/fuzz/fuzz.hpp"

using namespace strata;

namespace {
const uint8_t kSecret[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
constexpr uint64_t kTag = 7;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const uint8_t options = in.byte();
  std::string rest = in.rest();

  std::string hello = rest.substr(0, sizeof(net::Hello));
  if (options & 1 && hello.size() == sizeof(net::Hello)) {
    std::memcpy(hello.data() + offsetof(net::Hello, magic), &net::kHelloMagic, 8);
    std::memcpy(hello.data() + offsetof(net::Hello, secret), kSecret, 16);
  }
  if (options & 2 && hello.size() == sizeof(net::Hello))
    std::memcpy(hello.data() + offsetof(net::Hello, comm_tag), &kTag, 8);
  net::Hello h{};
  if (net::check_hello(hello.data(), hello.size(), kSecret, kTag, &h) == net::HelloVerdict::ok)
    FUZZ_CHECK(h.magic == net::kHelloMagic && std::memcmp(h.secret, kSecret, 16) == 0 && h.comm_tag == kTag);

  if (rest.size() <= hello.size()) return 0;
  const int nranks = 1 + static_cast<uint8_t>(rest[hello.size()]) % 8;
  std::string table = rest.substr(hello.size() + 1);
  if (options & 4) {
    for (size_t at = 0; at + sizeof(bootstrap::RankInfo) <= table.size(); at += sizeof(bootstrap::RankInfo)) {
      table[at + offsetof(bootstrap::RankInfo, host) + sizeof(bootstrap::RankInfo::host) - 1] = '\0';
      table[at + offsetof(bootstrap::RankInfo, machine) + sizeof(bootstrap::RankInfo::machine) - 1] = '\0';
    }
  }
  try {
    std::vector<bootstrap::RankInfo> infos = bootstrap::decode_rank_table(table.data(), table.size(), nranks, "fuzz input");
    FUZZ_CHECK(static_cast<int>(infos.size()) == nranks);
    std::vector<std::string> hosts;
    std::vector<RankCpus> cpus;
    for (const auto& info : infos) {
      hosts.emplace_back(info.host);
      cpus.push_back({info.machine, std::vector<uint64_t>(std::begin(info.cpus), std::end(info.cpus))});
      (void)info.listen.str();
      (void)info.listen.port();
      FUZZ_CHECK(info.tcp_nsocks >= 1);
    }
    Hierarchy hier = build_hierarchy(hosts, {}, "");
    FUZZ_CHECK(hier.levels.size() == 1 && hier.levels[0].ngroups >= 1 && hier.levels[0].ngroups <= nranks);
    (void)oversubscribed(cpus);
    for (int a = 0; a < nranks; ++a)
      for (int b = 0; b < nranks; ++b)
        FUZZ_CHECK(use_shm(infos[a], infos[b]) == use_shm(infos[b], infos[a]));
  } catch (const SystemError&) {
  }
  return 0;
}
