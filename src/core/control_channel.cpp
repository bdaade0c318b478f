#include "core/control_channel.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ground/log.hpp"
#include "ground/ranks_text.hpp"

namespace strata {

namespace {
using Clock = ControlChannel::Clock;

constexpr uint8_t kStopped = 1;  // the origin did not answer a liveness probe
constexpr uint8_t kUnsure = 2;   // a timeout, but every rank answered: the origin is only the rank waited on

// How long a rank that timed out waits for every peer to answer its liveness probe. A
// rank waiting in a call answers within milliseconds (it reads its control sockets every
// 2 ms of stall); one that is stopped, hung or not calling never does.
constexpr auto kProbeWindow = std::chrono::milliseconds(500);
// How long a failure waits for a notice that explains it, relayed by a peer (prefer_abort_notice).
constexpr auto kVerdictGrace = std::chrono::milliseconds(250);
// When the rank waited on answered that it waits too, it times out itself about now and
// names whom it waits on: its verdict, relayed, names the stopped rank better than this
// rank can (it has no connection to it), so this rank gives it this long to arrive.
constexpr auto kChainWindow = std::chrono::milliseconds(2500);

// Thrown, not returned: a relayed timeout is a TimeoutError, which a PeerError return value
// would slice (a caller's catch of TimeoutError would miss it).
[[noreturn]] void throw_abort_notice(const Notice& n, int from) {
  const int o = n.origin >= 0 ? n.origin : from;
  const std::string by = " (reported by rank " + std::to_string(from) + ")";
  if (n.flags & kUnsure)
    throw TimeoutError(o, "no progress from rank " + std::to_string(o) + " within STRATA_TIMEOUT" + by +
                              ", but every rank answered a liveness probe: none is known to have stopped; the ranks "
                              "may be calling different operations (STRATA_CHECK=1 tells which); the communicator is unusable");
  if (n.flags & kStopped)
    throw TimeoutError(o, "rank " + std::to_string(o) + " made no progress for STRATA_TIMEOUT and did not answer a "
                              "liveness probe: it is stopped, hung, or not calling this communicator" + by +
                              "; the communicator is unusable");
  throw PeerError(o, "rank " + std::to_string(o) + " failed or stopped" + by + "; the communicator is unusable");
}

PeerError refused_error(const Notice& n) {
  const auto f = static_cast<Fault>(n.why < kNumFaults ? n.why : 0);
  const auto c = static_cast<Collective>(n.coll < kNumCollectives ? n.coll : 0);
  if (f == Fault::mismatch)
    return PeerError(n.origin, "rank " + std::to_string(n.origin) + " found that the ranks called different operations "
                                   "(STRATA_CHECK; its error says which); the communicator can only be destroyed",
                     kind_of(f));
  return PeerError(n.origin, "rank " + std::to_string(n.origin) + " refused its arguments to " + name(c) + " (" +
                                 summary(f) + "); the call fails on every rank and the communicator can only be destroyed",
                   kind_of(f));
}

PeerError died(int j) {
  return PeerError(j, "rank " + std::to_string(j) + " died or closed its connection without destroying the communicator");
}

}  // namespace

ControlChannel::ControlChannel(int rank, int nranks, const Config& cfg)
    : rank_(rank),
      nranks_(nranks),
      peers_(static_cast<size_t>(nranks)),
      timeout_(cfg.timeout_s),
      timeout_text_(std::to_string(cfg.timeout_s) + " s (" + cfg.timeout_from + ")") {}

void ControlChannel::add(int peer, net::Fd fd) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  net::set_nonblocking(fd.get());
  p.fd = std::move(fd);
  for (const Notice& n : p.queued) (void)::send(p.fd.get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
  // A peer that connects after this rank failed (it dials to run a call with it) learns
  // why, as those connected before did: not only that the connection closed.
  if (told_.kind) (void)::send(p.fd.get(), &told_, sizeof told_, MSG_NOSIGNAL | MSG_DONTWAIT);
  p.queued.clear();
  p.queued.shrink_to_fit();
}

size_t ControlChannel::connections() const {
  return static_cast<size_t>(std::count_if(peers_.begin(), peers_.end(), [](const Peer& p) { return p.fd.valid(); }));
}

void ControlChannel::send_frame(int peer, const Notice& n, const void* payload, size_t len) {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  // Setup frames are small but may not fit a full socket buffer at once: a peer that
  // stops reading for a whole STRATA_TIMEOUT is stuck.
  const net::Deadline deadline = net::deadline_after(timeout_.count());
  const std::string who = "rank " + std::to_string(peer);
  try {
    net::send_all(p.fd.get(), &n, sizeof n, deadline, who);
    if (len) net::send_all(p.fd.get(), payload, len, deadline, who);
  } catch (const TimeoutError&) {
    throw TimeoutError(peer, "rank " + std::to_string(peer) + " took no connection setup from this rank for " +
                                 timeout_text_ + ": it is stopped, hung, or not calling this communicator");
  } catch (const SystemError& e) {
    throw PeerError(peer, "rank " + std::to_string(peer) + " closed its connection during setup (" + e.what() + ")");
  }
}

void ControlChannel::post(int peer, const Notice& n) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.fd.valid()) (void)::send(p.fd.get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
  else p.queued.push_back(n);
}

void ControlChannel::wait_fds(std::vector<pollfd>& out) const {
  for (const Peer& p : peers_)
    if (p.fd.valid() && !p.closed) out.push_back({p.fd.get(), POLLIN, 0});
  if (sink_) sink_->wait_fds(out);
}

bool ControlChannel::fill(Peer& p) {
  if (p.used == p.in.size()) p.in.clear(), p.used = 0;
  for (;;) {
    char buf[4096];
    const ssize_t r = ::recv(p.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      p.in.insert(p.in.end(), buf, buf + r);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;  // closed (0), or an error such as a reset
  }
}

bool ControlChannel::next_frame(Peer& p, Notice& n, const char*& payload) {
  const size_t avail = p.in.size() - p.used;
  if (avail < sizeof n) return false;
  std::memcpy(&n, p.in.data() + p.used, sizeof n);
  size_t len = 0;
  if (has_payload(n.kind)) {
    if (n.origin < 0 || n.origin > kMaxSetupPayload) {  // not one of ours: the stream is lost
      p.used = p.in.size();
      n.kind = 0;
      return true;
    }
    len = static_cast<size_t>(n.origin);
    if (avail < sizeof n + len) return false;
  }
  payload = p.in.data() + p.used + sizeof n;
  p.used += sizeof n + len;
  return true;
}

template <class Handle, class Closed>
void ControlChannel::read_all(const Handle& handle, const Closed& closed, int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (int j = 0; j < nranks_; ++j) {
    const Peer& p = peers_[static_cast<size_t>(j)];
    if (!p.fd.valid() || p.closed) continue;
    fds.push_back({p.fd.get(), POLLIN, 0});
    who.push_back(j);
  }
  const size_t ours = fds.size();
  // Bytes read earlier and not parsed yet (prefer_abort_notice reads without consuming)
  // are handled now, whatever the sockets say.
  bool buffered = false;
  for (int j : who) buffered |= peers_[static_cast<size_t>(j)].used < peers_[static_cast<size_t>(j)].in.size();
  if (sink_ && wait_ms > 0) sink_->wait_fds(fds);
  const int ready = fds.empty() ? 0 : ::poll(fds.data(), fds.size(), buffered ? 0 : wait_ms);
  if (ready <= 0 && !buffered) return;
  for (size_t i = 0; i < ours; ++i) {
    const int j = who[i];
    Peer& p = peers_[static_cast<size_t>(j)];
    if (!(ready > 0 && fds[i].revents) && p.used == p.in.size()) continue;
    const bool open = !(ready > 0 && fds[i].revents) || fill(p);
    Notice n{};
    const char* payload = nullptr;
    while (next_frame(p, n, payload)) handle(j, n, payload);
    if (!open && !p.closed) {
      p.closed = true;
      closed(j);
    }
  }
}

std::string ControlChannel::doing_text() const {
  if (doing_.device_call) {
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - doing_.since).count();
    return "in device call " + std::to_string(doing_.device_call) + ", waiting " + std::to_string(s) +
           " s for its stream to reach the call (the work queued on the stream before it has not finished)";
  }
  std::string s = std::string("in ") + name(doing_.coll) + " of " + std::to_string(doing_.count) + " x " + name(doing_.type);
  if (waiting_on_ >= 0) s += ", waiting on rank " + std::to_string(waiting_on_);
  return s;
}

std::string ControlChannel::answered_doing(int peer) const {
  if (peer < 0 || peers_[static_cast<size_t>(peer)].doing.empty()) return "";
  return "; rank " + std::to_string(peer) + " answered that it is " + peers_[static_cast<size_t>(peer)].doing;
}

void ControlChannel::answer_probe(int to) {
  const int fd = peers_[static_cast<size_t>(to)].fd.get();
  const Notice answer{'Q', 0, 0, kWaiting, doing_.device_call ? -1 : waiting_on_};
  const std::string what = doing_text();
  const Notice text{'W', 0, 0, 0, static_cast<int32_t>(what.size())};
  char frame[sizeof answer + sizeof text + 512];
  const size_t len = std::min(what.size(), sizeof frame - 2 * sizeof(Notice));
  std::memcpy(frame, &answer, sizeof answer);
  Notice sized = text;
  sized.origin = static_cast<int32_t>(len);
  std::memcpy(frame + sizeof answer, &sized, sizeof sized);
  std::memcpy(frame + 2 * sizeof(Notice), what.data(), len);
  (void)::send(fd, frame, 2 * sizeof(Notice) + len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ControlChannel::on_stall(Watch& w, Clock::time_point now, Clock::time_point last_progress,
                              const std::vector<int>& waited) {
  if (std::exception_ptr e = interrupted()) std::rethrow_exception(e);
  waiting_on_ = waited.empty() ? -1 : waited.front();
  // Closed or gone as of the last read: what was read with the closing or the goodbye (the
  // peer's last frames, a token) has been handled and the wait rechecked since, so it is
  // still waited on. A peer that said goodbye sends nothing more, but what it sent before
  // may still be on its way (on another socket than the goodbye, or in a FIFO polled
  // before the goodbye was read): a wait on it fails once nothing has moved for a short while.
  for (int j : waited) {
    if (peers_[static_cast<size_t>(j)].closed && !left(j)) {
      relay_ = {};
      throw died(j);
    }
    if (left(j) && now - last_progress > std::chrono::milliseconds(200)) throw departed(j);
  }
  if (now - w.last_check > std::chrono::milliseconds(2)) {
    check_control();
    if (sink_) sink_->service();
    w.last_check = now;
  }
  // Past the timeout, ask the peers whether they are alive before blaming one: the rank
  // waited on may itself be waiting on the one that stopped.
  if (now - last_progress <= timeout_) return;
  if (w.probe_sent == Clock::time_point{}) {
    w.probe_sent = now;
    send_probe();
    return;
  }
  const std::vector<int> silent = silent_peers(waited);
  if (now - w.probe_sent <= kProbeWindow && !silent.empty()) return;
  // Everyone answered. The rank waited on, if it waits in turn, is about to name whom.
  const int on = waiting_on_;
  if (silent.empty() && on >= 0 && peers_[static_cast<size_t>(on)].waits_on >= 0 &&
      peers_[static_cast<size_t>(on)].waits_on != rank_ && now - w.probe_sent <= kChainWindow)
    return;
  fail_stuck(now - w.probe_sent, waited);
}

std::exception_ptr ControlChannel::interrupted() const {
  if (aborted_.load(std::memory_order_relaxed)) return std::make_exception_ptr(InvalidUsage("the communicator was aborted"));
  if (revoked_.load(std::memory_order_relaxed))
    return std::make_exception_ptr(InvalidUsage("Comm::shrink was called on this communicator while this operation ran"));
  return nullptr;
}

void ControlChannel::fail_call(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const PeerError& pe) {
    try {
      prefer_abort_notice(pe.peer());
    } catch (const PeerError& notice) {
      fail(std::current_exception(), notice.peer());
      throw;
    }
    fail(e, pe.peer());
    throw;
  } catch (...) {
    fail(e, -1);
    throw;
  }
}

void ControlChannel::check_control() {
  // `deferred`: read before this peer's goodbye, however late it is handled.
  auto handle = [&](int j, const Notice& n, const char* payload, bool deferred = false) {
        Peer& p = peers_[static_cast<size_t>(j)];
        if (p.left && !deferred) return;  // nothing counts after a goodbye
        if (deferring_ && n.kind != 'S' && n.kind != 'B' && n.kind != 'P' && n.kind != 'Q') {
          deferred_.emplace_back(j, n);
          return;
        }
        switch (n.kind) {
          case 'S':
            if (sink_) sink_->setup_frame(j, n, payload);
            return;
          case 'B': p.left = true; return;  // a transfer still waiting on it fails in the stall check
          case 'P': answer_probe(j); return;
          case 'Q':
            p.answered = true;
            p.waits_on = (n.flags & kWaiting) ? n.origin : -1;
            return;
          case 'W': p.doing.assign(payload, static_cast<size_t>(n.origin)); return;
          default: break;
        }
        if (is_shrink_notice(n.kind)) {
          shrink_notices_.emplace_back(j, n);  // for this rank's own shrink to read
          throw shrinking_error(n, j);
        }
        if (n.kind == 'A' || n.kind == 'R') throw_notice_error(n, j);
        relay_ = {};
        throw died(j);  // not a notice of ours: the stream is lost
      };
  if (!deferring_ && !deferred_.empty()) {
    std::vector<std::pair<int, Notice>> kept;
    kept.swap(deferred_);
    for (const auto& [j, n] : kept)  // first: handling another may throw, and the shrink needs these
      if (is_shrink_notice(n.kind)) shrink_notices_.emplace_back(j, n);
    for (const auto& [j, n] : kept) {
      if (!is_shrink_notice(n.kind)) handle(j, n, nullptr, true);
      else throw shrinking_error(n, j);
    }
  }
  // A closed connection fails a wait on that rank (on_stall): a rank that finished its
  // part and then died fails no call that does not need it, and those that do fail.
  read_all(handle, [](int) {}, 0);
}

PeerError ControlChannel::shrinking_error(const Notice& n, int from) {
  from_notice_ = true;
  const int o = n.origin >= 0 ? n.origin : from;
  relay_ = {'A', 0, 0, 0, o};
  return PeerError(o, "rank " + std::to_string(from) + " is shrinking the communicator" +
                          (n.origin >= 0 ? " after rank " + std::to_string(n.origin) + " failed" : "") +
                          ": call Comm::shrink on this rank too (the communicator is unusable)");
}

void ControlChannel::throw_notice_error(const Notice& n, int from) {
  from_notice_ = true;
  if (n.kind == 'R') {
    relay_ = n;  // the others learn which rank refused what, not only that this one failed
    throw refused_error(n);
  }
  relay_ = {'A', 0, 0, n.flags, n.origin >= 0 ? n.origin : from};
  throw_abort_notice(n, from);
}

void ControlChannel::prefer_abort_notice(int culprit) {
  if (from_notice_) return;  // the error is a notice already: a goodbye behind it is its consequence
  // A rank that refused a call tells the ranks it is connected to and then may exit; a
  // rank that was dialing it, with no control connection to it yet, sees only a refused or
  // closed connection, and learns the verdict from a peer that relays it a moment later.
  // Wait that moment, so every rank names one cause. With a control connection to the
  // culprit, its verdict came first on it: a killed rank is reported at once.
  auto verdict = [&](const Notice& n, int from) {
    if (n.kind == 'A' || n.kind == 'R') throw_notice_error(n, from);
    if (n.kind == 'J') throw shrinking_error(n, from);
    if (n.kind == 'B' && from == culprit) throw departed(from);
  };
  for (const auto& [j, n] : deferred_) verdict(n, j);  // read while the communicator was being created
  const bool direct = culprit >= 0 && culprit < nranks_ && peers_[static_cast<size_t>(culprit)].fd.valid();
  const Clock::time_point until = Clock::now() + (direct ? Clock::duration::zero() : Clock::duration(kVerdictGrace));
  for (;;) {
    std::vector<pollfd> fds;
    for (int j = 0; j < nranks_; ++j) {
      Peer& p = peers_[static_cast<size_t>(j)];
      if (!p.fd.valid() || p.left) continue;
      if (fill(p)) fds.push_back({p.fd.get(), POLLIN, 0});
      // Read, not consumed: a shrink's notices stay for the shrink.
      for (size_t at = p.used; at + sizeof(Notice) <= p.in.size();) {
        Notice n;
        std::memcpy(&n, p.in.data() + at, sizeof n);
        verdict(n, j);
        at += sizeof n + (has_payload(n.kind) && n.origin > 0 ? static_cast<size_t>(n.origin) : 0);
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0 || fds.empty()) return;
    (void)::poll(fds.data(), fds.size(), static_cast<int>(left));
  }
}

void ControlChannel::send_probe() {
  Notice probe{'P', 0, 0, 0, rank_};
  for (Peer& p : peers_) {
    p.answered = false;
    p.waits_on = -1;
    p.doing.clear();
    if (p.fd.valid() && !p.left) (void)::send(p.fd.get(), &probe, sizeof probe, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

std::vector<int> ControlChannel::silent_peers(const std::vector<int>& waited) const {
  std::vector<int> silent;
  for (int j = 0; j < nranks_; ++j) {
    const Peer& p = peers_[static_cast<size_t>(j)];
    const bool unreachable = !p.fd.valid() && std::find(waited.begin(), waited.end(), j) != waited.end();
    if (j != rank_ && !p.left && (unreachable || (p.fd.valid() && !p.closed && !p.answered))) silent.push_back(j);
  }
  return silent;
}

void ControlChannel::fail_stuck(Clock::duration probed, const std::vector<int>& waited_on) {
  const int waited = waited_on.empty() ? -1 : waited_on.front();
  const std::string& T = timeout_text_;
  // A peer that died while this rank was not waiting on it: what the others wait on.
  for (int j = 0; j < nranks_; ++j)
    if (peers_[static_cast<size_t>(j)].closed && !left(j)) {
      relay_ = {};
      throw died(j);
    }
  const std::vector<int> silent = silent_peers(waited_on);
  if (silent.empty()) {
    relay_ = {'A', 0, 0, kUnsure, waited};
    throw TimeoutError(waited, "no progress from rank " + std::to_string(waited) + " for " + T +
                                   ", but every rank answered a liveness probe: none is known to have stopped; the ranks "
                                   "may be calling different operations (STRATA_CHECK=1 tells which), or one is busy "
                                   "elsewhere" + answered_doing(waited));
  }
  // The rank waited on, if it is silent; else a silent one it (transitively) waits on.
  const int culprit = std::find(silent.begin(), silent.end(), waited) != silent.end() ? waited : silent.front();
  relay_ = {'A', 0, 0, kStopped, culprit};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(probed).count();
  std::string msg = "rank " + std::to_string(culprit) + " made no progress for " + T;
  msg += connected(culprit) ? " and did not answer a liveness probe within " + std::to_string(ms) + " ms"
                            : " and never connected to this rank";
  msg += ": it is stopped (SIGSTOP, a debugger), hung, or not calling this communicator";
  if (silent.size() > 1) msg += "; silent too: " + ranks_text(silent);
  if (waited != culprit && waited >= 0)
    msg += "; this rank waited on rank " + std::to_string(waited) + ", which answered (it waits too)" +
           answered_doing(waited);
  throw TimeoutError(culprit, msg);
}

void ControlChannel::fail(std::exception_ptr e, int culprit) {
  if (!failed_) failed_ = e;
  if (revoked_.load()) return;  // this rank's shrink tells the peers
  if (culprit_ < 0) {
    culprit_ = relay_.kind ? relay_.origin : culprit;
    culprit_stopped_ = relay_.kind == 'A' && (relay_.flags & kStopped);
  }
  // Tell everyone connected, so ranks that were not talking to the culprit fail now,
  // naming it, and tell theirs.
  Notice n = relay_.kind ? relay_ : Notice{'A', 0, 0, 0, culprit};
  tell_everyone(n);
}

void ControlChannel::refuse(Fault fault, Collective coll, const std::string& what) {
  const std::string msg = "the communicator failed at an earlier call (" + what +
                          "); the other ranks were told, and it can only be destroyed";
  if (!failed_) failed_ = std::make_exception_ptr(Error(ErrorKind::invalid_usage, msg));
  tell_everyone({'R', static_cast<uint8_t>(fault), static_cast<uint8_t>(coll), 0, rank_});
}

void ControlChannel::tell_everyone(const Notice& n) {
  if (n.kind == 'A' || n.kind == 'R') told_ = n;
  for (const Peer& p : peers_)
    if (p.fd.valid()) (void)::send(p.fd.get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

PeerError ControlChannel::departed(int peer) const {
  return PeerError(peer, "rank " + std::to_string(peer) + " destroyed the communicator while rank " +
                             std::to_string(rank_) + " still expected data from it");
}

void ControlChannel::say_goodbye() { tell_everyone({'B', 0, 0, 0, rank_}); }

void ControlChannel::abort() {
  aborted_.store(true);
  // shutdown, not close: the descriptors stay valid for a thread still inside progress().
  for (const Peer& p : peers_)
    if (p.fd.valid()) ::shutdown(p.fd.get(), SHUT_RDWR);
}

void ControlChannel::read(Reader& r, int wait_ms) {
  for (const auto& [from, n] : deferred_)  // read while this communicator was being created
    if (is_shrink_notice(n.kind)) shrink_notices_.emplace_back(from, n);
  deferred_.clear();
  for (const auto& [from, n] : shrink_notices_) r.notice(from, n);
  shrink_notices_.clear();
  for (int j = 0; j < nranks_; ++j)  // closed while a call ran, which reported no one
    if (peers_[static_cast<size_t>(j)].closed) r.closed(j);
  read_all(
      [&](int j, const Notice& n, const char* payload) {
        Peer& p = peers_[static_cast<size_t>(j)];
        if (p.closed) return;
        if (n.kind == 'S') {
          if (sink_) sink_->setup_frame(j, n, payload);
        } else if (is_shrink_notice(n.kind)) {
          r.notice(j, n);
        } else if (n.kind == 'B') {  // it destroyed the parent: it takes no part
          p.closed = true;
          r.closed(j);
        } else if (n.kind == 'P') {
          answer_probe(j);  // this rank is alive, if not in a call
        }
      },
      [&](int j) { r.closed(j); }, wait_ms);
  if (sink_) sink_->service();
}

}  // namespace strata
