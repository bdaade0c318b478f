#include "core/bootstrap/bootstrap.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "ground/settings.hpp"
#include "ground/log.hpp"

namespace strata::bootstrap {

namespace {
constexpr uint64_t kJoinTag = 0;

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

void serve_root(net::Fd listener, Secret secret, double timeout_s) {
  net::Deadline deadline = net::deadline_after(timeout_s);
  std::vector<net::Fd> conns;
  std::vector<RankInfo> table;
  int nranks = -1, joined = 0;
  try {
    while (nranks < 0 || joined < nranks) {
      auto [fd, hello] = net::accept_authenticated(listener.get(), secret.bytes, kJoinTag, deadline);
      if (hello.role != net::Role::join || hello.nranks < 1) {
        STRATA_WARN("bootstrap root: dropped a connection that is not a rank joining");
        continue;
      }
      if (nranks < 0) {
        nranks = hello.nranks;
        conns.resize(static_cast<size_t>(nranks));
        table.resize(static_cast<size_t>(nranks));
      }
      if (hello.nranks != nranks || hello.rank < 0 || hello.rank >= nranks ||
          conns[static_cast<size_t>(hello.rank)].valid()) {
        STRATA_WARN("bootstrap root: rank %d of %d does not fit a job of %d ranks (or joined twice); dropped",
                    hello.rank, hello.nranks, nranks);
        continue;
      }
      RankInfo info;
      net::recv_all(fd.get(), &info, sizeof info, deadline, "rank " + std::to_string(hello.rank));
      table[static_cast<size_t>(hello.rank)] = info;
      conns[static_cast<size_t>(hello.rank)] = std::move(fd);
      ++joined;
    }
    for (int r = 0; r < nranks; ++r)
      net::send_all(conns[static_cast<size_t>(r)].get(), table.data(), table.size() * sizeof(RankInfo), deadline,
                    "rank " + std::to_string(r));
    STRATA_INFO("bootstrap root: %d ranks joined", nranks);
  } catch (const std::exception& e) {
    STRATA_WARN("bootstrap root gave up after %d of %d ranks joined: %s", joined, nranks, e.what());
  }
}
}  // namespace

std::string host_identity() {
  if (auto h = settings::raw("STRATA_HOST")) return *h;
  char name[128] = "";
  gethostname(name, sizeof name - 1);
  struct stat st{};
  std::string netns = stat("/proc/self/ns/net", &st) == 0 ? std::to_string(st.st_ino) : "";
  return std::string(name) + "/" + machine_identity() + "/" + netns;
}

std::string machine_identity() { return read_first_line("/proc/sys/kernel/random/boot_id"); }

void start_root(net::Fd listener, const Secret& secret, double timeout_s) {
  std::thread(serve_root, std::move(listener), secret, timeout_s).detach();
}

std::vector<RankInfo> join(const net::SockAddr& root, const Secret& secret, int rank, int nranks, RankInfo mine,
                           net::Deadline deadline) {
  net::Fd fd = net::connect_to(root, deadline);
  // Peers reach this rank at the address it reaches the root from.
  uint16_t port = mine.listen.port();
  mine.listen = net::local_address(fd.get());
  mine.listen.set_port(port);
  net::Hello h = net::make_hello(secret.bytes, kJoinTag, rank, nranks, net::Role::join, 0);
  std::string what = "the bootstrap root at " + root.str();
  net::send_all(fd.get(), &h, sizeof h, deadline, what);
  net::send_all(fd.get(), &mine, sizeof mine, deadline, what);
  std::vector<RankInfo> table(static_cast<size_t>(nranks));
  net::recv_all(fd.get(), table.data(), table.size() * sizeof(RankInfo), deadline, what);
  return table;
}

}  // namespace strata::bootstrap
