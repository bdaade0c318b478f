#include "core/bootstrap/bootstrap.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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

// The root's answer to every joined rank: the table of all ranks, or why there is none.
struct JoinReply {
  uint32_t magic;   // kReplyMagic
  uint32_t status;  // a ReplyStatus
  char why[248];    // not kTable: what the root gave up on, or refused
};
enum ReplyStatus : uint32_t {
  kGaveUp = 0,   // the job did not start (ranks missing at STRATA_TIMEOUT, ...)
  kTable = 1,    // the table of all ranks follows
  kRefused = 2,  // this rank's description was malformed
};
constexpr uint32_t kReplyMagic = 0x4a425453;  // "STBJ"

// `refused[r]`: why rank r's description was dropped, if it was (it may join again).
std::string missing_ranks(const std::vector<net::Fd>& conns, const std::vector<std::string>& refused, int nranks) {
  if (nranks < 0) return "no rank joined";
  std::string s, why;
  int missing = 0;
  for (int r = 0; r < nranks; ++r) {
    if (conns[static_cast<size_t>(r)].valid()) continue;
    s += (missing++ ? ", " : "") + std::to_string(r);
    if (!refused[static_cast<size_t>(r)].empty()) why += "; " + refused[static_cast<size_t>(r)];
  }
  return (missing == 1 ? "rank " : "ranks ") + s + " of " + std::to_string(nranks) + " did not join" + why;
}

// The answer without a table: the root gave up, or refused this rank.
void send_no_table(const net::Fd& fd, ReplyStatus status, const std::string& why) {
  JoinReply reply{kReplyMagic, status, {}};
  std::snprintf(reply.why, sizeof reply.why, "%s", why.c_str());
  (void)::send(fd.get(), &reply, sizeof reply, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void serve_root(net::Fd listener, Secret secret, double timeout_s) {
  net::Deadline deadline = net::deadline_after(timeout_s);
  net::Acceptor acceptor(listener.get(), secret.bytes, kJoinTag);
  std::vector<net::Fd> conns;
  std::vector<RankInfo> table;
  std::vector<std::string> refused;
  int nranks = -1, joined = 0;
  try {
    while (nranks < 0 || joined < nranks) {
      auto [fd, hello] = acceptor.next(deadline, "ranks to join the bootstrap root (" + missing_ranks(conns, refused, nranks) + ")");
      if (hello.role != net::Role::join || hello.nranks < 1) {
        STRATA_WARN("bootstrap root: dropped a connection that is not a rank joining");
        continue;
      }
      if (nranks < 0) {
        nranks = hello.nranks;
        conns.resize(static_cast<size_t>(nranks));
        table.resize(static_cast<size_t>(nranks));
        refused.resize(static_cast<size_t>(nranks));
      }
      if (hello.nranks != nranks || hello.rank < 0 || hello.rank >= nranks ||
          conns[static_cast<size_t>(hello.rank)].valid()) {
        STRATA_WARN("bootstrap root: rank %d of %d does not fit a job of %d ranks (or joined twice); dropped",
                    hello.rank, hello.nranks, nranks);
        continue;
      }
      RankInfo info;
      std::string who = "rank " + std::to_string(hello.rank);
      net::recv_all(fd.get(), &info, sizeof info, deadline, who);
      try {
        check_rank_info(info, who);
      } catch (const Error& e) {
        // The rank learns why at once, and so does everyone else if the job never starts.
        STRATA_WARN("bootstrap root: dropped %s: %s", who.c_str(), e.what());
        refused[static_cast<size_t>(hello.rank)] = std::string("its description was refused: ") + e.what();
        send_no_table(fd, kRefused, e.what());
        continue;
      }
      table[static_cast<size_t>(hello.rank)] = info;
      conns[static_cast<size_t>(hello.rank)] = std::move(fd);
      ++joined;
    }
    JoinReply reply{kReplyMagic, kTable, {}};
    // Rank 0 last: this thread lives in its process, which may end as soon as it has the
    // table (a communicator refused on every rank); what is already sent still arrives.
    for (int k = 1; k <= nranks; ++k) {
      const int r = k % nranks;
      const std::string to = "rank " + std::to_string(r);
      net::send_all(conns[static_cast<size_t>(r)].get(), &reply, sizeof reply, deadline, to);
      net::send_all(conns[static_cast<size_t>(r)].get(), table.data(), table.size() * sizeof(RankInfo), deadline, to);
    }
    STRATA_INFO("bootstrap root: %d ranks joined", nranks);
  } catch (const std::exception& e) {
    // The ranks that joined learn why, instead of timing out on their own.
    STRATA_WARN("bootstrap root gave up after %d of %d ranks joined: %s", joined, nranks, e.what());
    for (net::Fd& fd : conns)
      if (fd.valid()) send_no_table(fd, kGaveUp, e.what());
  }
}
}  // namespace

void check_rank_info(const RankInfo& info, const std::string& from) {
  auto bad = [&](const std::string& why) { return SystemError("malformed rank info from " + from + ": " + why); };
  if (std::memchr(info.host, '\0', sizeof info.host) == nullptr) throw bad("host identity not terminated");
  if (std::memchr(info.machine, '\0', sizeof info.machine) == nullptr) throw bad("machine identity not terminated");
  const sa_family_t family = info.listen.ss.ss_family;
  const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if ((family != AF_INET && family != AF_INET6) || info.listen.len != len) throw bad("not an IPv4 or IPv6 address");
  const settings::Setting& nsocks = settings::find("STRATA_TCP_NSOCKS");
  if (info.tcp_nsocks < nsocks.lo || info.tcp_nsocks > nsocks.hi)
    throw bad("STRATA_TCP_NSOCKS=" + std::to_string(info.tcp_nsocks) + " is out of range");
}

std::vector<RankInfo> decode_rank_table(const void* bytes, size_t n, int nranks, const std::string& from) {
  if (nranks < 1 || n != static_cast<size_t>(nranks) * sizeof(RankInfo))
    throw SystemError("malformed rank table from " + from + ": " + std::to_string(n) + " bytes for " +
                      std::to_string(nranks) + " ranks");
  std::vector<RankInfo> table(static_cast<size_t>(nranks));
  std::memcpy(table.data(), bytes, n);
  for (int r = 0; r < nranks; ++r) check_rank_info(table[static_cast<size_t>(r)], from + " (rank " + std::to_string(r) + ")");
  return table;
}

std::string host_identity() {
  if (auto h = settings::raw("STRATA_HOST")) {
    // RankInfo::host holds it whole, with room for an emulated node's suffix
    // ("/emulated-node-16777215") and the NUL: a cut one could make two hosts one.
    constexpr size_t kMax = sizeof(RankInfo::host) - 24;
    if (h->size() > kMax)
      throw InvalidArgument("STRATA_HOST is " + std::to_string(h->size()) + " bytes long; at most " +
                            std::to_string(kMax) + " are allowed");
    return *h;
  }
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
  JoinReply reply{};
  // A second past our own deadline: a root that gives up at the same moment still tells us why.
  net::recv_all(fd.get(), &reply, sizeof reply, deadline + std::chrono::seconds(1), what);
  if (reply.magic != kReplyMagic) throw SystemError(what + " answered with something else (a different Strata version?)");
  reply.why[sizeof reply.why - 1] = 0;
  if (reply.status == kRefused) throw SystemError(what + " refused this rank's description: " + reply.why);
  if (reply.status != kTable) throw TimeoutError(-1, what + " gave up: " + reply.why);
  std::vector<char> bytes(static_cast<size_t>(nranks) * sizeof(RankInfo));
  net::recv_all(fd.get(), bytes.data(), bytes.size(), deadline, what);
  return decode_rank_table(bytes.data(), bytes.size(), nranks, what);
}

}  // namespace strata::bootstrap
