#include "core/engine.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
using Clock = std::chrono::steady_clock;

// Control messages: fixed 8 bytes so a reader never sees half of one.
struct Notice {
  char kind;  // 'B' goodbye, 'A' abort
  char pad[3];
  int32_t origin;  // abort: the rank whose failure caused it (-1 unknown)
};
static_assert(sizeof(Notice) == 8);

PeerError abort_notice_error(const Notice& n, int from) {
  int o = n.origin >= 0 ? n.origin : from;
  return PeerError(o, "rank " + std::to_string(o) + " failed or stopped (reported by rank " + std::to_string(from) +
                          "); the communicator is unusable");
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
// delays it, so an idle rank yields at its first empty poll, as OpenMPI's
// mpi_yield_when_idle does (small reduce_scatter/all_reduce on 4 ranks sharing 2 cores:
// 1.1-1.4x faster than after 64 polls; docs/benchmarks.md).
Engine::Engine(int rank, int nranks, Mesh mesh, const Config& cfg, bool oversubscribed)
    : rank_(rank),
      nranks_(nranks),
      mesh_(std::move(mesh)),
      cfg_(cfg),
      peer_left_(static_cast<size_t>(nranks)),
      spins_before_yield_(oversubscribed ? 1 : 64) {
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
// when nothing moves we yield, then sleep in poll() (tcp) or short naps (shared memory),
// so ranks that outnumber the cores do not starve the ones doing the work.
void Engine::wait_links() {
  // The clock is read only once the links stall: a small call that completes while
  // spinning never pays for it.
  Clock::time_point last_progress, last_check;
  const auto timeout = std::chrono::duration<double>(cfg_.timeout_s);
  unsigned idle_spins = 0;
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
    if (all_idle) return;
    if (moved) {
      idle_spins = 0;
      continue;
    }
    ++idle_spins;
    if (idle_spins < spins_before_yield_) continue;
    auto now = Clock::now();
    if (idle_spins == spins_before_yield_) {  // the first idle moment of this stall
      last_progress = now;
      if (last_check == Clock::time_point{}) last_check = now;
    }
    if (aborted_.load(std::memory_order_relaxed)) throw InvalidUsage("the communicator was aborted");
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
    if (now - last_progress > timeout) fail_stuck();
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
      sched_yield();
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
    int j = peers[i];
    Notice n{};
    ssize_t r = ::recv(fds[i].fd, &n, sizeof n, MSG_DONTWAIT | MSG_WAITALL);
    if (r == static_cast<ssize_t>(sizeof n) && n.kind == 'B') {
      peer_left_[j] = true;  // a transfer still waiting on it fails in wait_links
      continue;
    }
    if (r == static_cast<ssize_t>(sizeof n) && n.kind == 'A') {
      throw abort_notice_error(n, j);
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    throw PeerError(j, "rank " + std::to_string(j) + " died or closed its connection without destroying the communicator");
  }
}

void Engine::prefer_abort_notice(int culprit) {
  for (int j = 0; j < nranks_; ++j) {
    if (!mesh_.control[j].valid() || peer_left_[j]) continue;
    Notice n{};
    ssize_t r = ::recv(mesh_.control[j].get(), &n, sizeof n, MSG_DONTWAIT | MSG_PEEK);
    if (r == static_cast<ssize_t>(sizeof n) && n.kind == 'A') {
      throw abort_notice_error(n, j);
    }
    if (r == static_cast<ssize_t>(sizeof n) && n.kind == 'B' && j == culprit) throw departed(j);
  }
}

void Engine::fail_stuck() {
  int peer = -1;
  for (Link* l : active_)
    if (!l->idle()) {
      peer = l->peer();
      break;
    }
  throw TimeoutError(peer, "no progress from rank " + std::to_string(peer) + " for " + std::to_string(cfg_.timeout_s) +
                               " s (" + cfg_.timeout_from + "); it is stuck, too slow, or not calling the same collective");
}

void Engine::fail(std::exception_ptr e, int culprit) {
  if (!failed_) failed_ = e;
  // Tell everyone, so ranks that were not talking to the culprit fail now, naming it.
  Notice n{'A', {}, culprit};
  for (int j = 0; j < nranks_; ++j)
    if (mesh_.control[j].valid()) (void)::send(mesh_.control[j].get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

PeerError Engine::departed(int peer) const {
  return PeerError(peer, "rank " + std::to_string(peer) + " destroyed the communicator while rank " +
                             std::to_string(rank_) + " still expected data from it");
}

void Engine::say_goodbye() {
  Notice n{'B', {}, rank_};
  for (int j = 0; j < nranks_; ++j)
    if (mesh_.control[j].valid()) (void)::send(mesh_.control[j].get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Engine::abort() {
  aborted_.store(true);
  // shutdown, not close: the descriptors stay valid for a thread still inside progress().
  for (auto& fd : mesh_.control)
    if (fd.valid()) ::shutdown(fd.get(), SHUT_RDWR);
}

}  // namespace strata
