#include "core/engine.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "ground/log.hpp"
#include "ground/ranks_text.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
using Clock = std::chrono::steady_clock;

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

// The engine's slot beside a cached plan.
struct EngineSlot : PlanSlot {
  StoreChooser stores;  // learnt over this plan's calls
};

char* at(const Engine::Buffers& b, Ref r, size_t esz) {
  if (r.buf == Buf::absolute) return reinterpret_cast<char*>(r.offset);
  char* base = r.buf == Buf::input ? const_cast<char*>(static_cast<const char*>(b.input))
               : r.buf == Buf::output ? static_cast<char*>(b.output)
                                      : static_cast<char*>(b.scratch);
  return base + r.offset * esz;
}
}  // namespace

// With more ranks than CPUs, the peer a rank waits for is often not running: spinning only
// delays it, so an idle rank starts by yielding at its first empty poll, as OpenMPI's
// mpi_yield_when_idle does (small reduce_scatter/all_reduce on 4 ranks sharing 2 cores:
// 1.1-1.4x faster than after 64 polls; docs/benchmarks.md). Then, as with ranks = CPUs,
// the WaitPolicy learns from how stalls end whether this CPU is shared.
Engine::Engine(int rank, int nranks, Mesh mesh, const Config& cfg, bool oversubscribed)
    : rank_(rank),
      nranks_(nranks),
      mesh_(std::move(mesh)),
      cfg_(cfg),
      peer_left_(static_cast<size_t>(nranks)),
      answered_(static_cast<size_t>(nranks)),
      waits_(oversubscribed) {
  for (auto& fd : mesh_.control)
    if (fd.valid()) net::set_nonblocking(fd.get());
  for (const auto& l : mesh_.links)
    if (l && !l->caps().forwards_reductions) links_forward_ = false;
}

Engine::~Engine() = default;

void Engine::execute(const Plan& plan, const Call& call, void* scratch, std::unique_ptr<PlanSlot>& slot) {
  if (failed_) std::rethrow_exception(failed_);
  StoreChooser* stores = nullptr;
  if (call.bytes() >= StoreChooser::kMinBytes) {
    if (!slot) slot = std::make_unique<EngineSlot>();
    stores = &static_cast<EngineSlot&>(*slot).stores;
  }
  const Buffers bufs{call.send, call.recv, scratch};
  const DataType type = call.type;
  const ReduceOp op = call.op;
  const bool streaming = stores && stores->streaming();
  if (streaming != streaming_stores_) {
    for (auto& l : mesh_.links)
      if (l) l->set_streaming_stores(streaming);
    streaming_stores_ = streaming;
  }
  const auto t0 = stores ? Clock::now() : Clock::time_point{};
  try {
    for (size_t r = 0; r < plan.rounds(); ++r) run_round(plan, r, bufs, type, op);
    if (stores) stores->record(streaming, std::chrono::duration<double>(Clock::now() - t0).count());
  } catch (const PeerError& e) {
    try {
      prefer_abort_notice(e.peer());
    } catch (const PeerError& notice) {
      fail(std::current_exception(), notice.peer());
      throw;
    }
    fail(std::current_exception(), e.peer());
    throw;
  } catch (...) {
    fail(std::current_exception(), -1);
    throw;
  }
}

void Engine::run_round(const Plan& plan, size_t round, const Buffers& bufs, DataType type, ReduceOp op) {
  const size_t esz = size_of(type);
  ReduceFn fn = nullptr;  // looked up by the first step that reduces (broadcasts and gathers have none)
  auto reducer = [&] { return fn ? fn : (fn = reduce_fn(type, op)); };
  active_.clear();
  for (size_t i = plan.round_begin[round]; i < plan.round_end(round); ++i) {
    const Step& s = plan.steps[i];
    char* src = s.kind != StepKind::recv && s.kind != StepKind::finalize ? at(bufs, s.src, esz) : nullptr;
    char* dst = s.kind != StepKind::send ? at(bufs, s.dst, esz) : nullptr;
    size_t bytes = s.count * esz;
    switch (s.kind) {
      case StepKind::copy:
        if (src != dst) std::memmove(dst, src, bytes);
        break;
      case StepKind::reduce: reducer()(dst, dst, src, s.count); break;
      case StepKind::finalize: finalize(dst, s.count, type, op, nranks_); break;
      case StepKind::send:
      case StepKind::recv:
      case StepKind::recv_reduce:
      case StepKind::recv_reduce_send: {
        Link* l = mesh_.links[static_cast<size_t>(s.peer)].get();
        if (!l) throw InternalError("plan step addresses this rank itself");
        const bool forward = s.kind == StepKind::recv_reduce_send;
        if (forward && (!l->caps().forwards_reductions || has_finalize(op)))
          throw InternalError("plan forwards a reduction over a link or op that cannot");
        if (s.kind == StepKind::send) l->post_send(src, bytes);
        else if (s.kind == StepKind::recv) l->post_recv(dst, bytes, {});
        else l->post_recv(dst, bytes, Reduction{reducer(), esz, src, forward});
        active_.push_back(l);
        break;
      }
    }
  }
  if (!active_.empty()) wait_links();
}

// Progress until every link of the round is idle. Spinning is cheapest while data flows;
// when nothing moves we spin a while (WaitPolicy: not at all where the peer needs this
// CPU), then yield, then sleep in poll() (tcp) or short naps (shared memory), so ranks
// that outnumber the cores do not starve the ones doing the work.
void Engine::wait_links() {
  // The clock is read only once the links stall: a small call that completes while
  // spinning never pays for it.
  Clock::time_point last_progress, last_check;
  const auto timeout = std::chrono::duration<double>(cfg_.timeout_s);
  Clock::time_point probe_sent;  // when this stall's liveness probe went out
  unsigned idle_spins = 0, spin_polls = waits_.spin_polls();
  unsigned yields = 0, switched = 0;  // this stall's, for the WaitPolicy
  std::vector<pollfd> fds;
  for (;;) {
    bool moved = false, all_idle = true;
    for (Link* l : active_) {
      if (l->idle()) continue;
      try {
        moved |= l->progress();
      } catch (const PeerError&) {
        if (peer_left_[static_cast<size_t>(l->peer())]) throw departed(l->peer());
        throw;
      }
      all_idle &= l->idle();
    }
    if (moved || all_idle) {
      if (idle_spins) {  // a stall ended
        waits_.stall_ended(yields, switched);
        spin_polls = waits_.spin_polls();
        idle_spins = yields = switched = 0;
      }
      if (all_idle) return;
      continue;
    }
    ++idle_spins;
    if (idle_spins < spin_polls) continue;
    auto now = Clock::now();
    if (idle_spins == spin_polls) {  // the first idle moment of this stall
      last_progress = now;
      probe_sent = Clock::time_point{};
      if (last_check == Clock::time_point{}) last_check = now;
    }
    if (aborted_.load(std::memory_order_relaxed)) throw InvalidUsage("the communicator was aborted");
    if (revoked_.load(std::memory_order_relaxed))
      throw InvalidUsage("Comm::shrink was called on this communicator while this operation ran");
    if (now - last_check > std::chrono::milliseconds(2)) {
      check_control();
      last_check = now;
    }
    // A peer that said goodbye sends nothing more, but what it sent before may still be on
    // its way (on another socket than the goodbye, or in a FIFO polled before the goodbye
    // was read): a receive from it fails once nothing has moved for a short while.
    if (now - last_progress > std::chrono::milliseconds(200))
      for (Link* l : active_)
        if (!l->idle() && peer_left_[static_cast<size_t>(l->peer())]) throw departed(l->peer());
    // Past the timeout, ask every peer whether it is alive before blaming one: the rank
    // waited on may itself be waiting on the one that stopped.
    if (now - last_progress > timeout) {
      if (probe_sent == Clock::time_point{}) {
        probe_sent = now;
        send_probe();
      } else if (now - probe_sent > kProbeWindow || all_answered()) {
        fail_stuck(now - probe_sent);
      }
    }
    fds.clear();
    bool all_fd = true;
    for (Link* l : active_) {
      if (l->idle()) continue;
      size_t before = fds.size();
      l->wait_fds(fds);
      all_fd &= fds.size() > before;
    }
    if (all_fd && now - last_progress > std::chrono::microseconds(200)) {
      ::poll(fds.data(), fds.size(), 10);
    } else if (now - last_progress < std::chrono::milliseconds(5)) {
      const auto before = Clock::now();
      sched_yield();
      ++yields;
      switched += Clock::now() - before >= WaitPolicy::kSwitchedYield;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void Engine::check_control() {
  std::vector<pollfd> fds;
  std::vector<int> peers;
  for (int j = 0; j < nranks_; ++j) {
    if (!mesh_.control[j].valid() || peer_left_[j]) continue;
    fds.push_back({mesh_.control[j].get(), POLLIN, 0});
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

PeerError Engine::shrinking_error(const Notice& n, int from) {
  from_notice_ = true;
  const int o = n.origin >= 0 ? n.origin : from;
  relay_ = {'A', 0, 0, 0, o};
  return PeerError(o, "rank " + std::to_string(from) + " is shrinking the communicator" +
                          (n.origin >= 0 ? " after rank " + std::to_string(n.origin) + " failed" : "") +
                          ": call Comm::shrink on this rank too (the communicator is unusable)");
}

void Engine::throw_notice_error(const Notice& n, int from) {
  from_notice_ = true;
  if (n.kind == 'R') {
    relay_ = n;  // the others learn which rank refused what, not only that this one failed
    throw refused_error(n);
  }
  relay_ = {'A', 0, 0, n.flags, n.origin >= 0 ? n.origin : from};
  throw_abort_notice(n, from);
}

void Engine::prefer_abort_notice(int culprit) {
  if (from_notice_) return;  // the error is a notice already: a goodbye behind it is its consequence
  for (int j = 0; j < nranks_; ++j) {
    if (!mesh_.control[j].valid() || peer_left_[j]) continue;
    Notice waiting[16]{};
    ssize_t r = ::recv(mesh_.control[j].get(), waiting, sizeof waiting, MSG_DONTWAIT | MSG_PEEK);
    for (ssize_t k = 0; r > 0 && k < r / static_cast<ssize_t>(sizeof(Notice)); ++k) {
      const Notice& n = waiting[k];
      if (n.kind == 'A' || n.kind == 'R') throw_notice_error(n, j);
      if (n.kind == 'J') throw shrinking_error(n, j);
      if (n.kind == 'B' && j == culprit) throw departed(j);
    }
  }
}

void Engine::send_probe() {
  answered_.assign(static_cast<size_t>(nranks_), false);
  Notice probe{'P', 0, 0, 0, rank_};
  for (int j = 0; j < nranks_; ++j)
    if (mesh_.control[j].valid() && !peer_left_[j])
      (void)::send(mesh_.control[j].get(), &probe, sizeof probe, MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::vector<int> Engine::silent_peers() const {
  std::vector<int> silent;
  for (int j = 0; j < nranks_; ++j)
    if (j != rank_ && mesh_.control[j].valid() && !peer_left_[j] && !answered_[j]) silent.push_back(j);
  return silent;
}

bool Engine::all_answered() const { return silent_peers().empty(); }

void Engine::fail_stuck(Clock::duration probed) {
  int waited = -1;
  for (Link* l : active_)
    if (!l->idle()) {
      waited = l->peer();
      break;
    }
  const std::string T = std::to_string(cfg_.timeout_s) + " s (" + cfg_.timeout_from + ")";
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

void Engine::fail(std::exception_ptr e, int culprit) {
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

void Engine::refuse(Fault fault, Collective coll, const std::string& what) {
  const std::string msg = "the communicator failed at an earlier call (" + what +
                          "); the other ranks were told, and it can only be destroyed";
  if (!failed_) failed_ = std::make_exception_ptr(Error(ErrorKind::invalid_usage, msg));
  tell_everyone({'R', static_cast<uint8_t>(fault), static_cast<uint8_t>(coll), 0, rank_});
}

void Engine::tell_everyone(const Notice& n) {
  for (int j = 0; j < nranks_; ++j)
    if (mesh_.control[j].valid()) (void)::send(mesh_.control[j].get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

PeerError Engine::departed(int peer) const {
  return PeerError(peer, "rank " + std::to_string(peer) + " destroyed the communicator while rank " +
                             std::to_string(rank_) + " still expected data from it");
}

void Engine::say_goodbye() { tell_everyone({'B', 0, 0, 0, rank_}); }

void Engine::abort() {
  aborted_.store(true);
  // shutdown, not close: the descriptors stay valid for a thread still inside progress().
  for (auto& fd : mesh_.control)
    if (fd.valid()) ::shutdown(fd.get(), SHUT_RDWR);
}

}  // namespace strata
