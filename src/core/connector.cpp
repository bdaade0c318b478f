#include "core/connector.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

using bootstrap::RankInfo;

namespace {
bool same_host(const RankInfo& a, const RankInfo& b) { return std::strncmp(a.host, b.host, sizeof a.host) == 0; }

// How often a lower rank awaiting a higher one's call checks that its listener is there.
constexpr auto kProbeEvery = std::chrono::seconds(1);

// What a quick connect to a listener finds: refused means its process has exited (or
// destroyed the communicator); anything else, including no answer yet, is not a verdict.
enum class Listening { yes, refused, unknown };
Listening check_listener(const net::SockAddr& at, const net::Hello& hello) {
  net::Fd fd(::socket(at.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Listening::unknown;
  int err = 0;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&at.ss), at.len) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, 100) <= 0) return Listening::unknown;
      socklen_t len = sizeof err;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return Listening::unknown;
    }
  }
  if (err == ECONNREFUSED) return Listening::refused;
  if (err != 0) return Listening::unknown;
  // Said, so the listener drops it quietly instead of logging a connection without a hello.
  (void)::send(fd.get(), &hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT);
  return Listening::yes;
}
}  // namespace

bool use_shm(const RankInfo& a, const RankInfo& b) { return !a.force_tcp && !b.force_tcp && same_host(a, b); }

Connector::Connector(int rank, const std::vector<RankInfo>& table, net::Incoming in,
                     const bootstrap::Secret& secret, uint64_t comm_tag, const Config& cfg, ControlChannel& control)
    : rank_(rank),
      nranks_(static_cast<int>(table.size())),
      table_(table),
      in_(std::move(in)),
      secret_(secret),
      tag_(comm_tag),
      cfg_(cfg),
      control_(control),
      pairs_(table.size()),
      sockets_(table.size()) {
  // Every higher rank may call at once (an all-to-all), each with its data sockets.
  in_.accept(secret.bytes, comm_tag, std::max<size_t>(net::Acceptor::kMaxPending, 2 * table.size()));
  for (Links& l : links_) l.resize(table.size());
  // A forced transport that cannot work here is a clear error before anything connects.
  if (const TransportRow* forced = row_named(cfg.transport); forced && forced->transport->require)
    forced->transport->require();
  bool remote_peer = false;  // RDMA is only probed when some peer is on another host
  for (int j = 0; j < nranks_; ++j) remote_peer |= j != rank && !use_shm(table[rank], table[j]);
  offer_ = make_offer(cfg, remote_peer);
  control_.set_sink(this);
}

Connector::~Connector() {
  control_.set_sink(nullptr);
  // Device links first (staging wraps the host links), then the setups they came from.
  for (size_t k = links_.size(); k-- > 0;) {
    for (Pair& p : pairs_) p.kinds[k].made.reset();
    links_[k].clear();
  }
  setups_.clear();
}

void Connector::want(int peer, MemoryKind kind) {
  if (peer == rank_) return;
  Pair& p = pairs_[static_cast<size_t>(peer)];
  p.kinds[static_cast<size_t>(MemoryKind::host)].wanted = true;
  p.kinds[static_cast<size_t>(kind)].wanted = true;
  start(peer);
  activate(peer);
}

void Connector::want_control(int peer) {
  if (peer == rank_) return;
  start(peer);
  activate(peer);
}

bool Connector::ready(int peer, MemoryKind kind) const {
  if (peer == rank_) return true;
  const KindState& k = pairs_[static_cast<size_t>(peer)].kinds[static_cast<size_t>(kind)];
  return k.chosen && (!k.row || links(kind)[static_cast<size_t>(peer)]);
}

bool Connector::control_ready(int peer) const {
  const Pair& p = pairs_[static_cast<size_t>(peer)];
  return peer == rank_ || (p.control == Control::up && p.offer_got);
}

void Connector::activate(int peer) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  if (p.active) return;
  p.active = true;
  active_.push_back(peer);
}

void Connector::start(int peer) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  if (p.control != Control::none || p.failure) return;
  if (rank_ > peer) return dial(peer);
  // The higher rank calls. It may not need this pair yet (it waits in a call that does not):
  // a probe at its listener asks it to call now, and, repeated, checks that it is there.
  p.control = Control::awaited;
  probe_listener(peer);
}

void Connector::unreachable_peer(int peer, const std::string& why) {
  fail_pair(peer, std::make_exception_ptr(PeerError(
                      peer, "cannot connect to " + who(peer) + " at " + table_[static_cast<size_t>(peer)].listen.str() +
                                ": " + why + " (its process has exited, or destroyed the communicator)")));
}

void Connector::fail_pair(int peer, std::exception_ptr why) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  if (!p.failure) p.failure = why;
}

net::Fd Connector::call(int peer, net::Role role, int index) {
  net::Fd fd = net::connect_to(table_[static_cast<size_t>(peer)].listen, net::deadline_after(cfg_.timeout_s), true);
  const net::Hello h = net::make_hello(secret_.bytes, tag_, rank_, nranks_, role, index);
  net::send_all(fd.get(), &h, sizeof h, net::deadline_after(cfg_.timeout_s), who(peer));
  return fd;
}

void Connector::dial(int peer) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  net::Fd fd;
  try {
    fd = call(peer, net::Role::control, 0);
  } catch (const Error& e) {
    return unreachable_peer(peer, e.what());
  }
  control_.add(peer, std::move(fd));
  p.control = Control::up;
  send_setup(peer, 'O', MemoryKind::host, &offer_, sizeof offer_);
}

void Connector::take_caught(Accepted a) {
  const int j = a.second.rank;
  try {
    take(std::move(a));
  } catch (const Error&) {
    if (j >= 0 && j < nranks_) fail_pair(j, std::current_exception());
  }
}

void Connector::take(Accepted a) {
  auto& [fd, h] = a;
  const int j = h.rank;
  if (h.role == net::Role::probe) {  // a lower rank that needs the pair: call it
    if (h.nranks == nranks_ && j >= 0 && j < rank_) {
      start(j);
      activate(j);
    }
    return;
  }
  if (h.nranks != nranks_ || j <= rank_ || j >= nranks_ ||
      (h.role != net::Role::control && h.role != net::Role::data)) {
    STRATA_WARN("dropped an unexpected connection (rank %d of %d, role %d)", h.rank, h.nranks, static_cast<int>(h.role));
    return;
  }
  Pair& p = pairs_[static_cast<size_t>(j)];
  STRATA_TRACE("connect: tag %llx rank %d took rank %d's %s connection", static_cast<unsigned long long>(tag_), rank_, j,
               h.role == net::Role::control ? "control" : "data");
  if (h.role == net::Role::control) {
    if (p.control == Control::up) {
      STRATA_WARN("dropped a second control connection from rank %d", j);
      return;
    }
    control_.add(j, std::move(fd));
    p.control = Control::up;
    send_setup(j, 'O', MemoryKind::host, &offer_, sizeof offer_);
  } else {
    std::vector<net::Fd>& s = sockets_[static_cast<size_t>(j)];
    const auto index = static_cast<size_t>(h.index);
    const KindState& host = p.kinds[static_cast<size_t>(MemoryKind::host)];
    if (h.index < 0 || h.index >= data_sockets(j) || (index < s.size() && s[index].valid()) || host.made ||
        links(MemoryKind::host)[j]) {
      STRATA_WARN("dropped an unexpected data connection from rank %d (socket %d)", j, h.index);
      return;
    }
    if (s.size() <= index) s.resize(index + 1);
    s[index] = std::move(fd);
    p.kinds[static_cast<size_t>(MemoryKind::host)].wanted = true;  // it makes its tcp link: so must we
  }
  activate(j);
}

void Connector::probe_listener(int peer) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  p.next_probe = net::Clock::now() + kProbeEvery;
  const net::Hello h = net::make_hello(secret_.bytes, tag_, rank_, nranks_, net::Role::probe, 0);
  if (check_listener(table_[static_cast<size_t>(peer)].listen, h) == Listening::refused)
    unreachable_peer(peer, "its listener refuses connections");
}

void Connector::setup_frame(int peer, const Notice& n, const char* payload) {
  try {
    take_setup(peer, n, payload);
  } catch (const Error&) {
    fail_pair(peer, std::current_exception());
  }
}

void Connector::take_setup(int peer, const Notice& n, const char* payload) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  const auto len = static_cast<size_t>(n.origin);
  auto bad = [&] { return SystemError("unexpected setup message from " + who(peer) + " (a different Strata version?)"); };
  STRATA_TRACE("connect: tag %llx rank %d <- rank %d: setup '%c' (kind %d, %d B)", static_cast<unsigned long long>(tag_),
               rank_, peer, n.why, n.coll, n.origin);
  if (n.why == 'O') {
    if (len != sizeof p.theirs || p.offer_got) throw bad();
    std::memcpy(&p.theirs, payload, len);
    if (!p.theirs.valid()) throw bad();
    p.offer_got = true;
  } else {
    if (n.coll >= kNumMemoryKinds) throw bad();
    KindState& k = p.kinds[n.coll];
    if (n.why == 'I') {
      if (k.have_remote) throw bad();  // once per pair and kind
      k.remote.assign(payload, payload + len);
      k.have_remote = true;
      k.wanted = true;  // the peer makes this kind's link: so must we
      p.kinds[static_cast<size_t>(MemoryKind::host)].wanted = true;
    } else if (n.why == 'T') {
      if (len != 1 || k.token_got) throw bad();
      k.note = static_cast<uint8_t>(payload[0]);
      k.token_got = true;
    } else {
      throw bad();
    }
  }
  activate(peer);
}

bool Connector::progress() {
  bool moved = false;
  for (Accepted& a : in_.early) take_caught(std::move(a)), moved = true;
  in_.early.clear();
  for (;;) {
    Accepted a = in_.acceptor->poll_once();
    if (!a.first.valid()) break;
    take_caught(std::move(a));
    moved = true;
  }
  for (size_t i = 0; i < active_.size();) {
    const int j = active_[i];
    Pair& p = pairs_[static_cast<size_t>(j)];
    try {
      moved |= advance(j);
    } catch (const Error&) {
      fail_pair(j, std::current_exception());
    }
    bool done = p.failure || (p.control == Control::up && p.offer_got);
    for (MemoryKind k : kAllMemoryKinds) done &= !p.kinds[static_cast<size_t>(k)].wanted || p.failure || ready(j, k);
    if (done) {
      p.active = false;
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  return moved;
}

bool Connector::advance(int peer) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  if (p.failure) return false;
  if (p.control == Control::awaited) {
    if (net::Clock::now() >= p.next_probe) probe_listener(peer);
    return false;
  }
  if (p.control != Control::up || !p.offer_got) return false;
  bool moved = false;
  for (MemoryKind k : kAllMemoryKinds) moved |= advance_kind(peer, k);
  return moved;
}

bool Connector::advance_kind(int peer, MemoryKind kind) {
  Pair& p = pairs_[static_cast<size_t>(peer)];
  KindState& k = p.kinds[static_cast<size_t>(kind)];
  if (!k.wanted || (k.chosen && !k.row)) return false;
  if (kind != MemoryKind::host && !device_allowed_) return false;
  bool moved = false;
  if (!k.chosen) {
    const bool same = same_host(table_[static_cast<size_t>(rank_)], table_[static_cast<size_t>(peer)]);
    k.row = rank_ < peer ? choose(kind, same, offer_, p.theirs, rank_, peer) : choose(kind, same, p.theirs, offer_, peer, rank_);
    k.chosen = true;
    if (!k.row) return true;
    moved = true;
  }
  if (kind != MemoryKind::host && !ready(peer, MemoryKind::host)) return moved;  // device links may wrap it
  LinkSetup& setup = setup_for(*k.row, kind);
  std::unique_ptr<Link>& link = k.made;
  if (!link && !links(kind)[static_cast<size_t>(peer)]) {
    if (k.row->handshake) {
      if (!k.info_sent) {
        const std::vector<char> blob = setup.local_info(peer);
        send_setup(peer, 'I', kind, blob.data(), blob.size());
        k.info_sent = true;
        moved = true;
      }
      if (!k.have_remote) return moved;
      link = connect_link(setup, peer, k.remote);
    } else {
      // No connection info, but the peer must learn that this rank wants the link: the
      // higher rank calls the data sockets, and may not need the pair itself yet.
      if (!k.info_sent) {
        send_setup(peer, 'I', kind, nullptr, 0);
        k.info_sent = true;
        moved = true;
      }
      if (rank_ > peer && !p.data_dialed) {
        p.data_dialed = true;
        std::vector<net::Fd>& s = sockets_[static_cast<size_t>(peer)];
        for (int i = 0; i < data_sockets(peer); ++i) {
          net::Fd fd;
          try {
            fd = call(peer, net::Role::data, i);
          } catch (const Error& e) {
            unreachable_peer(peer, e.what());
            return true;
          }
          s.push_back(std::move(fd));
        }
        moved = true;
      }
      if (!has_data_sockets(peer)) return moved;
      link = connect_link(setup, peer, {});
    }
    if (!link) return moved;
    k.remote = {};
    if (!link->caps().memory.has(kind))
      throw InternalError(std::string("the ") + k.row->name + " link to " + who(peer) + " does not carry " + name(kind) +
                          " memory, which its row says it does");
    if (kind != MemoryKind::host) link->prepare();  // on the caller's thread: device_allowed_
    STRATA_INFO("rank %d -> rank %d via %s (%s)%s", rank_, peer, link->name(), setup.describe(peer).c_str(),
                kind == MemoryKind::host ? "" : (std::string(" for ") + name(kind) + " memory").c_str());
    moved = true;
  }
  if (!k.token_sent) {
    const uint8_t note = setup.connected_note(peer);
    send_setup(peer, 'T', kind, &note, 1);
    k.token_sent = true;
    moved = true;
  }
  if (k.token_got && !k.noted) {
    links(kind)[static_cast<size_t>(peer)] = std::move(k.made);
    setup.peer_connected(peer, k.note);
    k.noted = true;
    moved = true;
  }
  return moved;
}

// A row that cannot reach a peer's side (its segment, its socket) has usually lost the
// peer: the error names it.
std::unique_ptr<Link> Connector::connect_link(LinkSetup& setup, int peer, const std::vector<char>& remote) {
  try {
    return setup.connect(peer, remote);
  } catch (const PeerError&) {
    throw;
  } catch (const SystemError& e) {
    throw PeerError(peer, "connecting to " + who(peer) + " failed: " + e.what(), ErrorKind::system);
  }
}

int Connector::data_sockets(int peer) const {
  return std::min(table_[static_cast<size_t>(rank_)].tcp_nsocks, table_[static_cast<size_t>(peer)].tcp_nsocks);
}

bool Connector::has_data_sockets(int peer) const {
  const std::vector<net::Fd>& s = sockets_[static_cast<size_t>(peer)];
  const auto want = static_cast<size_t>(data_sockets(peer));
  if (s.size() < want) return false;
  for (size_t i = 0; i < want; ++i)
    if (!s[i].valid()) return false;
  return true;
}

LinkSetup& Connector::setup_for(const TransportRow& row, MemoryKind kind) {
  std::unique_ptr<LinkSetup>& setup = setups_[{&row, kind}];
  if (setup) return *setup;
  SetupContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.cfg = &cfg_;
  ctx.memory = kind;
  ctx.secret = secret_.bytes;
  ctx.comm_tag = tag_;
  ctx.sockets = &sockets_;
  ctx.host_links = &links(MemoryKind::host);
  const RankInfo& me = table_[static_cast<size_t>(rank_)];
  for (int j = 0; j < nranks_; ++j) {
    const bool same = same_host(me, table_[static_cast<size_t>(j)]);
    ctx.same_host.push_back(same);
    ctx.address.push_back(table_[static_cast<size_t>(j)].listen.str());
    if (j != rank_ && (row.reach != Reach::same_host || same)) ctx.peers.push_back(j);
  }
  setup = row.transport->create(ctx);
  return *setup;
}

void Connector::send_setup(int peer, char step, MemoryKind kind, const void* payload, size_t len) {
  STRATA_TRACE("connect: tag %llx rank %d -> rank %d: setup '%c' (%s, %zu B)", static_cast<unsigned long long>(tag_), rank_,
               peer, step, name(kind), len);
  const Notice n{'S', static_cast<uint8_t>(step), static_cast<uint8_t>(kind), 0, static_cast<int32_t>(len)};
  control_.send_frame(peer, n, payload, len);
}

}  // namespace strata
