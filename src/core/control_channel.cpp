#include "core/control_channel.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

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

}  // namespace

ControlChannel::ControlChannel(int rank, int nranks, std::vector<net::Fd> control, const Config& cfg)
    : rank_(rank),
      nranks_(nranks),
      control_(std::move(control)),
      timeout_(cfg.timeout_s),
      timeout_text_(std::to_string(cfg.timeout_s) + " s (" + cfg.timeout_from + ")"),
      peer_left_(static_cast<size_t>(nranks)),
      answered_(static_cast<size_t>(nranks)) {
  for (auto& fd : control_)
    if (fd.valid()) net::set_nonblocking(fd.get());
}

void ControlChannel::on_stall(Watch& w, Clock::time_point now, Clock::time_point last_progress,
                              const std::vector<Link*>& waiting) {
  if (std::exception_ptr e = interrupted()) std::rethrow_exception(e);
  if (now - w.last_check > std::chrono::milliseconds(2)) {
    check_control();
    w.last_check = now;
  }
  // A peer that said goodbye sends nothing more, but what it sent before may still be on
  // its way (on another socket than the goodbye, or in a FIFO polled before the goodbye
  // was read): a receive from it fails once nothing has moved for a short while.
  if (now - last_progress > std::chrono::milliseconds(200))
    for (Link* l : waiting)
      if (!l->idle() && left(l->peer())) throw departed(l->peer());
  // Past the timeout, ask every peer whether it is alive before blaming one: the rank
  // waited on may itself be waiting on the one that stopped.
  if (now - last_progress > timeout_) {
    if (w.probe_sent == Clock::time_point{}) {
      w.probe_sent = now;
      send_probe();
    } else if (now - w.probe_sent > kProbeWindow || all_answered()) {
      fail_stuck(now - w.probe_sent, waiting);
    }
  }
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
  std::vector<pollfd> fds;
  std::vector<int> peers;
  for (int j = 0; j < nranks_; ++j) {
    if (!control_[j].valid() || peer_left_[j]) continue;
    fds.push_back({control_[j].get(), POLLIN, 0});
    peers.push_back(j);
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    const int j = peers[i];
    for (;;) {  // every notice waiting on this socket: probes may queue up behind others
      Notice n{};
      // Peeked first: a shrink's notices stay for this rank's own shrink to read.
      ssize_t r = ::recv(fds[i].fd, &n, sizeof n, MSG_DONTWAIT | MSG_PEEK);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      if (r == static_cast<ssize_t>(sizeof n) && is_shrink_notice(n.kind)) throw shrinking_error(n, j);
      if (r > 0) r = ::recv(fds[i].fd, &n, sizeof n, MSG_DONTWAIT | MSG_WAITALL);
      if (r != static_cast<ssize_t>(sizeof n)) {
        relay_ = {};
        throw PeerError(j, "rank " + std::to_string(j) + " died or closed its connection without destroying the communicator");
      }
      if (n.kind == 'B') {
        peer_left_[j] = true;  // a transfer still waiting on it fails in wait_links
        break;
      }
      if (n.kind == 'P') {
        Notice answer{'Q', 0, 0, 0, rank_};
        (void)::send(fds[i].fd, &answer, sizeof answer, MSG_NOSIGNAL | MSG_DONTWAIT);
      } else if (n.kind == 'Q') {
        answered_[j] = true;
      } else {
        throw_notice_error(n, j);
      }
    }
  }
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
  for (int j = 0; j < nranks_; ++j) {
    if (!control_[j].valid() || peer_left_[j]) continue;
    Notice waiting[16]{};
    ssize_t r = ::recv(control_[j].get(), waiting, sizeof waiting, MSG_DONTWAIT | MSG_PEEK);
    for (ssize_t k = 0; r > 0 && k < r / static_cast<ssize_t>(sizeof(Notice)); ++k) {
      const Notice& n = waiting[k];
      if (n.kind == 'A' || n.kind == 'R') throw_notice_error(n, j);
      if (n.kind == 'J') throw shrinking_error(n, j);
      if (n.kind == 'B' && j == culprit) throw departed(j);
    }
  }
}

void ControlChannel::send_probe() {
  answered_.assign(static_cast<size_t>(nranks_), false);
  Notice probe{'P', 0, 0, 0, rank_};
  for (int j = 0; j < nranks_; ++j)
    if (control_[j].valid() && !peer_left_[j])
      (void)::send(control_[j].get(), &probe, sizeof probe, MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::vector<int> ControlChannel::silent_peers() const {
  std::vector<int> silent;
  for (int j = 0; j < nranks_; ++j)
    if (j != rank_ && control_[j].valid() && !peer_left_[j] && !answered_[j]) silent.push_back(j);
  return silent;
}

bool ControlChannel::all_answered() const { return silent_peers().empty(); }

void ControlChannel::fail_stuck(Clock::duration probed, const std::vector<Link*>& waiting) {
  int waited = -1;
  for (Link* l : waiting)
    if (!l->idle()) {
      waited = l->peer();
      break;
    }
  const std::string& T = timeout_text_;
  const std::vector<int> silent = silent_peers();
  if (silent.empty()) {
    relay_ = {'A', 0, 0, kUnsure, waited};
    throw TimeoutError(waited, "no progress from rank " + std::to_string(waited) + " for " + T +
                                   ", but every rank answered a liveness probe: none is known to have stopped; the ranks "
                                   "may be calling different operations (STRATA_CHECK=1 tells which), or one is busy "
                                   "elsewhere");
  }
  // The rank waited on, if it is silent; else a silent one it (transitively) waits on.
  const int culprit = std::find(silent.begin(), silent.end(), waited) != silent.end() ? waited : silent.front();
  relay_ = {'A', 0, 0, kStopped, culprit};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(probed).count();
  std::string msg = "rank " + std::to_string(culprit) + " made no progress for " + T + " and did not answer a " +
                    "liveness probe within " + std::to_string(ms) + " ms: it is stopped (SIGSTOP, a debugger), hung, "
                    "or not calling this communicator";
  if (silent.size() > 1) msg += "; silent too: " + ranks_text(silent);
  if (waited != culprit && waited >= 0)
    msg += "; this rank waited on rank " + std::to_string(waited) + ", which answered (it waits too)";
  throw TimeoutError(culprit, msg);
}

void ControlChannel::fail(std::exception_ptr e, int culprit) {
  if (!failed_) failed_ = e;
  if (revoked_.load()) return;  // this rank's shrink tells the peers
  if (culprit_ < 0) {
    culprit_ = relay_.kind ? relay_.origin : culprit;
    culprit_stopped_ = relay_.kind == 'A' && (relay_.flags & kStopped);
  }
  // Tell everyone, so ranks that were not talking to the culprit fail now, naming it.
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
  for (int j = 0; j < nranks_; ++j)
    if (control_[j].valid()) (void)::send(control_[j].get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

PeerError ControlChannel::departed(int peer) const {
  return PeerError(peer, "rank " + std::to_string(peer) + " destroyed the communicator while rank " +
                             std::to_string(rank_) + " still expected data from it");
}

void ControlChannel::say_goodbye() { tell_everyone({'B', 0, 0, 0, rank_}); }

void ControlChannel::abort() {
  aborted_.store(true);
  // shutdown, not close: the descriptors stay valid for a thread still inside progress().
  for (auto& fd : control_)
    if (fd.valid()) ::shutdown(fd.get(), SHUT_RDWR);
}

}  // namespace strata
