#include "core/bootstrap/bootstrap.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "ground/settings.hpp"
#include "ground/log.hpp"
#include "algorithms/connections.hpp"

namespace strata::bootstrap {

namespace {
constexpr uint64_t kJoinTag = 0;

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// What a joined rank is told on its listener (and, when refused, on its join connection):
// the table of all ranks, or why there is none.
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

std::string who(int rank) { return rank < 0 ? std::string("the bootstrap root") : "rank " + std::to_string(rank); }

// `refused[r]`: why rank r's description was dropped, if it was (it may join again).
std::string missing_ranks(const std::vector<char>& joined, const std::vector<std::string>& refused, int nranks) {
  if (nranks < 0) return "no rank joined";
  std::string s, why;
  int missing = 0;
  for (int r = 0; r < nranks; ++r) {
    if (joined[static_cast<size_t>(r)]) continue;
    s += (missing++ ? ", " : "") + std::to_string(r);
    if (!refused[static_cast<size_t>(r)].empty()) why += "; " + refused[static_cast<size_t>(r)];
  }
  return (missing == 1 ? "rank " : "ranks ") + s + " of " + std::to_string(nranks) + " did not join" + why;
}

JoinReply reply_of(ReplyStatus status, const std::string& why) {
  JoinReply reply{kReplyMagic, status, {}};
  std::snprintf(reply.why, sizeof reply.why, "%s", why.c_str());
  return reply;
}

// The answer to `to` at its listener: a reply and, for kTable, the table. False when `to`
// cannot be reached (its process is gone); a peer that takes nothing for `deadline` throws.
bool deliver(const Secret& secret, int from, int to, const std::vector<RankInfo>& table, const JoinReply& reply,
             net::Deadline deadline) {
  net::Fd fd;
  try {
    fd = net::connect_to(table[static_cast<size_t>(to)].listen, deadline, true);
  } catch (const Error& e) {
    STRATA_WARN("bootstrap: %s cannot reach rank %d: %s", who(from).c_str(), to, e.what());
    return false;
  }
  const net::Hello h = net::make_hello(secret.bytes, kWorldTag, from, static_cast<int>(table.size()), net::Role::table, 0);
  const std::string what = "rank " + std::to_string(to);
  net::send_all(fd.get(), &h, sizeof h, deadline, what);
  net::send_all(fd.get(), &reply, sizeof reply, deadline, what);
  if (reply.status == kTable) net::send_all(fd.get(), table.data(), table.size() * sizeof(RankInfo), deadline, what);
  return true;
}

// The table to `to`'s subtree: to `to`, or, when it cannot be reached, to its children in
// its place (their calls to it will name it).
void deliver_subtree(const Secret& secret, int from, int to, const std::vector<RankInfo>& table, const JoinReply& reply,
                     net::Deadline deadline) {
  if (deliver(secret, from, to, table, reply, deadline)) return;
  for (int c : bootstrap_children(to, static_cast<int>(table.size()))) deliver_subtree(secret, from, c, table, reply, deadline);
}

void serve_root(net::Fd listener, Secret secret, double timeout_s) {
  net::Deadline deadline = net::deadline_after(timeout_s);
  net::Acceptor acceptor(listener.get(), secret.bytes, kJoinTag);
  std::vector<char> joined;
  std::vector<RankInfo> table;
  std::vector<std::string> refused;
  int nranks = -1, count = 0;
  try {
    while (nranks < 0 || count < nranks) {
      auto [fd, hello] = acceptor.next(deadline, "ranks to join the bootstrap root (" + missing_ranks(joined, refused, nranks) + ")");
      if (hello.role != net::Role::join || hello.nranks < 1) {
        STRATA_WARN("bootstrap root: dropped a connection that is not a rank joining");
        continue;
      }
      if (nranks < 0) {
        nranks = hello.nranks;
        joined.resize(static_cast<size_t>(nranks));
        table.resize(static_cast<size_t>(nranks));
        refused.resize(static_cast<size_t>(nranks));
        // Every rank calls at about the same moment: none waits for a place.
        acceptor.set_max_pending(std::max<size_t>(net::Acceptor::kMaxPending, static_cast<size_t>(nranks)));
      }
      if (hello.nranks != nranks || hello.rank < 0 || hello.rank >= nranks || joined[static_cast<size_t>(hello.rank)]) {
        STRATA_WARN("bootstrap root: rank %d of %d does not fit a job of %d ranks (or joined twice); dropped",
                    hello.rank, hello.nranks, nranks);
        continue;
      }
      RankInfo info;
      std::string from = "rank " + std::to_string(hello.rank);
      net::recv_all(fd.get(), &info, sizeof info, deadline, from);
      try {
        check_rank_info(info, from);
      } catch (const Error& e) {
        // The rank learns why at once, and so does everyone else if the job never starts.
        STRATA_WARN("bootstrap root: dropped %s: %s", from.c_str(), e.what());
        refused[static_cast<size_t>(hello.rank)] = std::string("its description was refused: ") + e.what();
        const JoinReply no = reply_of(kRefused, e.what());
        (void)::send(fd.get(), &no, sizeof no, MSG_NOSIGNAL | MSG_DONTWAIT);
        continue;
      }
      // Closed now: the rank reads this as accepted, and the root holds no connection per rank.
      table[static_cast<size_t>(hello.rank)] = info;
      joined[static_cast<size_t>(hello.rank)] = 1;
      ++count;
    }
    deliver_subtree(secret, -1, 0, table, reply_of(kTable, ""), deadline);
    STRATA_INFO("bootstrap root: %d ranks joined", nranks);
  } catch (const std::exception& e) {
    // The ranks that joined learn why, instead of timing out on their own.
    STRATA_WARN("bootstrap root gave up after %d of %d ranks joined: %s", count, nranks, e.what());
    const JoinReply no = reply_of(kGaveUp, e.what());
    const net::Deadline soon = net::deadline_after(1.0);
    for (int r = 0; r < nranks; ++r)
      if (joined[static_cast<size_t>(r)]) {
        try {
          (void)deliver(secret, -1, r, table, no, soon);
        } catch (const Error&) {
        }
      }
  }
}

// What arrived on the join connection: nothing and then its end (accepted), or a refusal.
void read_join_answer(const net::Fd& fd, const std::string& what, net::Deadline deadline) {
  JoinReply reply{};
  size_t got = 0;
  while (got < sizeof reply) {
    pollfd p{fd.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::Clock::now()).count();
    if (left <= 0) throw TimeoutError(-1, "timed out (STRATA_TIMEOUT) waiting for " + what + " to take this rank");
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    const ssize_t r = ::recv(fd.get(), reinterpret_cast<char*>(&reply) + got, sizeof reply - got, 0);
    if (r == 0 && got == 0) return;  // closed with nothing said: taken
    if (r <= 0) throw SystemError(what + " closed the connection mid-answer");
    got += static_cast<size_t>(r);
  }
  if (reply.magic != kReplyMagic) throw SystemError(what + " answered with something else (a different Strata version?)");
  reply.why[sizeof reply.why - 1] = 0;
  if (reply.status == kRefused) throw SystemError(what + " refused this rank's description: " + reply.why);
  throw TimeoutError(-1, what + " gave up: " + reply.why);
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
                           net::Incoming& in, net::Deadline deadline) {
  const std::string what = "the bootstrap root at " + root.str();
  {
    net::Fd fd = net::connect_to(root, deadline);
    // Peers reach this rank at the address it reaches the root from.
    uint16_t port = mine.listen.port();
    mine.listen = net::local_address(fd.get());
    mine.listen.set_port(port);
    net::Hello h = net::make_hello(secret.bytes, kJoinTag, rank, nranks, net::Role::join, 0);
    net::send_all(fd.get(), &h, sizeof h, deadline, what);
    net::send_all(fd.get(), &mine, sizeof mine, deadline, what);
    read_join_answer(fd, what, deadline);
  }
  // A second past our own deadline: a root that gives up at the same moment still tells us why.
  const net::Deadline until = deadline + std::chrono::seconds(1);
  net::Acceptor& acceptor = in.accept(secret.bytes, kWorldTag, std::max<size_t>(net::Acceptor::kMaxPending, 2 * static_cast<size_t>(nranks)));
  std::vector<RankInfo> table;
  const int parent = bootstrap_parent(rank);
  for (;;) {
    auto got = acceptor.next(until, "the rank table from " + who(parent) + " (" + what + " passes it down a tree)");
    net::Hello& h = got.second;
    if (h.role != net::Role::table) {  // a peer that has the table already and needs this rank
      in.early.push_back(std::move(got));
      continue;
    }
    const std::string from = who(h.rank);
    JoinReply reply{};
    net::recv_all(got.first.get(), &reply, sizeof reply, until, from);
    if (reply.magic != kReplyMagic) throw SystemError(from + " sent something else than the rank table (a different Strata version?)");
    reply.why[sizeof reply.why - 1] = 0;
    if (reply.status != kTable) throw TimeoutError(-1, what + " gave up: " + reply.why);
    std::vector<char> bytes(static_cast<size_t>(nranks) * sizeof(RankInfo));
    net::recv_all(got.first.get(), bytes.data(), bytes.size(), until, from);
    table = decode_rank_table(bytes.data(), bytes.size(), nranks, from);
    break;
  }
  for (int c : bootstrap_children(rank, nranks)) deliver_subtree(secret, rank, c, table, reply_of(kTable, ""), deadline);
  return table;
}

}  // namespace strata::bootstrap
