#include "core/engine.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
using Clock = std::chrono::steady_clock;
// How long settle() polls the executor before it waits as wait_links does.
constexpr auto kSettleSpin = std::chrono::milliseconds(2);

// The engine's slot beside a cached plan.
struct EngineSlot : PlanSlot {
  StoreChooser stores;  // learnt over this plan's calls
  // Host memory's reduction kernel for the last call's type and op, looked up by its first
  // reducing step (a plan serves every type of its element size, and every op).
  ReduceFn host_reduce(DataType t, ReduceOp o) {
    if (!reduce_ || t != type_ || o != op_) reduce_ = reduce_fn(t, o), type_ = t, op_ = o;
    return reduce_;
  }

 private:
  ReduceFn reduce_ = nullptr;
  DataType type_ = DataType::uint8;
  ReduceOp op_ = ReduceOp::sum;
};

char* at(const Engine::Buffers& b, Ref r, size_t esz) {
  if (r.buf == Buf::absolute) return reinterpret_cast<char*>(r.offset);
  char* base = r.buf == Buf::input    ? const_cast<char*>(static_cast<const char*>(b.input))
               : r.buf == Buf::output ? static_cast<char*>(b.output)
                                      : static_cast<char*>(b.scratch);
  return base + r.offset * esz;
}
}  // namespace

// With more ranks than CPUs, the peer a rank waits for is often not running: spinning only
// delays it, so an idle rank starts by yielding at its first empty poll, as OpenMPI's
// mpi_yield_when_idle does (docs/benchmarks.md). Then, as with ranks = CPUs, the
// WaitPolicy learns from how stalls end whether this CPU is shared.
Engine::Engine(int rank, const std::vector<bootstrap::RankInfo>& table, net::Incoming in,
               const bootstrap::Secret& secret, uint64_t comm_tag, const Config& cfg, bool oversubscribed)
    : rank_(rank),
      nranks_(static_cast<int>(table.size())),
      control_(rank, static_cast<int>(table.size()), cfg),
      connector_(rank, table, std::move(in), secret, comm_tag, cfg, control_),
      waits_(oversubscribed),
      timeout_s_(cfg.timeout_s) {}

Engine::~Engine() = default;

void Engine::execute(const Plan& plan, const Call& call, void* scratch, std::unique_ptr<PlanSlot>& slot) {
  if (control_.failed()) std::rethrow_exception(control_.failed());
  if (control_.has_deferred()) {  // a peer failed a call while this rank was still creating
    try {
      control_.check_now();
    } catch (...) {
      control_.fail_call(std::current_exception());
    }
  }
  if (!slot) slot = std::make_unique<EngineSlot>();
  EngineSlot& kept = static_cast<EngineSlot&>(*slot);
  StoreChooser* stores = call.bytes() >= StoreChooser::kMinBytes ? &kept.stores : nullptr;
  control_.doing_call(call.coll, call.count, call.type);
  CallRun run{call, links_of(call.memory), executor(call.memory), {call.send, call.recv, scratch}, kept};
  const bool streaming = stores && stores->streaming();
  if (bool& told = streaming_stores_[static_cast<size_t>(call.memory)]; streaming != told) {
    for (auto& l : links_of(call.memory))
      if (l) l->set_streaming_stores(streaming);
    told = streaming;
  }
  const auto t0 = stores ? Clock::now() : Clock::time_point{};
  try {
    for (size_t r = 0; r < plan.rounds(); ++r) run_round(plan, r, run);
    if (run.unsettled) settle(run);  // the call's results are there when it returns
    if (stores) stores->record(streaming, std::chrono::duration<double>(Clock::now() - t0).count());
  } catch (...) {
    control_.fail_call(std::current_exception());
  }
}

void Engine::run_round(const Plan& plan, size_t round, CallRun& run) {
  const DataType type = run.call.type;
  const ReduceOp op = run.call.op;
  const size_t esz = size_of(type);
  // Device memory's links and executor reduce by type and op with kernels of their own.
  auto reduction = [&](const char* local, bool forward) {
    if (run.call.memory != MemoryKind::host) return Reduction::on_device(type, op, esz, local, forward);
    return Reduction::on_host(static_cast<EngineSlot&>(run.slot).host_reduce(type, op), esz, local, forward, type, op);
  };
  active_.clear();
  for (size_t i = plan.round_begin[round]; i < plan.round_end(round); ++i) {
    const Step& s = plan.steps[i];
    char* src = s.kind != StepKind::recv && s.kind != StepKind::finalize ? at(run.bufs, s.src, esz) : nullptr;
    char* dst = s.kind != StepKind::send ? at(run.bufs, s.dst, esz) : nullptr;
    size_t bytes = s.count * esz;
    switch (s.kind) {
      case StepKind::copy:
        if (src == dst) break;
        run.exec.copy(dst, src, bytes);
        run.unsettled = true;
        break;
      case StepKind::reduce:
        run.exec.reduce(dst, src, s.count, reduction(nullptr, false));
        run.unsettled = true;
        break;
      case StepKind::finalize:
        run.exec.finalize(dst, s.count, type, op, nranks_);
        run.unsettled = true;
        break;
      case StepKind::send:
      case StepKind::recv:
      case StepKind::recv_reduce:
      case StepKind::recv_reduce_send: {
        Link* l = run.links[static_cast<size_t>(s.peer)].get();
        if (!l) {  // the first call that needs this peer: connect it, and the rest of the plan's
          connect_rest(plan, round, run.call.memory);
          l = run.links[static_cast<size_t>(s.peer)].get();
          if (!l) throw_no_link(s.peer, run.call.memory);
        }
        const bool forward = s.kind == StepKind::recv_reduce_send;
        if (forward && (!l->caps().forwards_reductions || has_finalize(op)))
          throw InternalError("plan forwards a reduction over a link or op that cannot");
        if (run.unsettled) settle(run);
        if (s.kind == StepKind::send) l->post_send(src, bytes);
        else if (s.kind == StepKind::recv) l->post_recv(dst, bytes, {});
        else l->post_recv(dst, bytes, reduction(src, forward));
        active_.push_back(l);
        break;
      }
    }
  }
  if (active_.empty()) return;
  try {
    wait_links();
  } catch (...) {
    for (Link* l : active_) l->abandon();
    throw;
  }
}

void Engine::settle(CallRun& run) {
  run.unsettled = false;
  run.exec.flush();
  // A call's local steps take microseconds on a device: poll them on their own first, as
  // a blocking wait would, and only then in wait_until, whose stalls nap a millisecond at
  // a time (that nap on every call would be most of a small call's latency).
  const auto begin = Clock::now();
  while (Clock::now() - begin < kSettleSpin) {
    if (run.exec.settled()) return;
    sched_yield();
  }
  // No rank is waited on: a stall past STRATA_TIMEOUT is this rank's own device work.
  wait_until(
      [&] {
        if (run.exec.settled()) return true;
        if (Clock::now() - begin > std::chrono::duration<double>(timeout_s_))
          throw TimeoutError(rank_, "rank " + std::to_string(rank_) +
                                        ": the device work of a call's local steps "
                                        "(copies, reductions) did not finish within " +
                                        std::to_string(timeout_s_) + " s");
        return false;
      },
      [](std::vector<int>&) {});
}

void Engine::prepare(MemoryKind kind) {
  if (prepared_[static_cast<size_t>(kind)]) return;
  executor(kind);
  prepared_[static_cast<size_t>(kind)] = true;
}

bool Engine::connected(const std::vector<int>& peers, MemoryKind kind) const {
  for (int p : peers)
    if (!connector_.ready(p, kind)) return false;
  return true;
}

bool Engine::connected_or_raise(const std::vector<int>& peers, MemoryKind kind) const {
  for (int p : peers) connector_.raise(p);
  return connected(peers, kind);
}

void Engine::connect(const std::vector<int>& peers, MemoryKind kind) {
  if (control_.failed()) std::rethrow_exception(control_.failed());
  if (connected(peers, kind)) return;
  if (kind != MemoryKind::host && !connector_.device_allowed())
    throw InternalError(std::string("links for ") + name(kind) +
                        " memory were not made before the call held its "
                        "stream (they are made on the caller's thread: core/comm.cpp)");
  try {
    for (int p : peers) connector_.want(p, kind);
    wait_until([&] { return connected_or_raise(peers, kind); },
               [&](std::vector<int>& w) {
                 for (int p : peers)
                   if (!connector_.ready(p, kind)) w.push_back(p);
               });
  } catch (...) {
    control_.fail_call(std::current_exception());
  }
}

void Engine::connect_control(const std::vector<int>& peers) {
  if (control_.failed()) std::rethrow_exception(control_.failed());
  auto done = [&] {
    // A pair whose control connection is up is done here, even if a link the peer asked
    // for since then failed (it left after its calls): a call that needs the pair says so.
    for (int p : peers) {
      if (connector_.control_ready(p)) continue;
      connector_.raise(p);
      return false;
    }
    return true;
  };
  if (done()) return;
  control_.defer_notices(true);
  try {
    for (int p : peers) connector_.want_control(p);
    wait_until(done, [&](std::vector<int>& w) {
      for (int p : peers)
        if (!connector_.control_ready(p)) w.push_back(p);
    });
  } catch (...) {
    control_.defer_notices(false);
    control_.fail_call(std::current_exception());
  }
  control_.defer_notices(false);
}

bool Engine::forwards(int peer, MemoryKind kind) {
  connect({peer}, kind);
  const auto& l = links_of(kind)[static_cast<size_t>(peer)];
  return l && l->caps().forwards_reductions;
}

void Engine::connect_rest(const Plan& plan, size_t round, MemoryKind kind) {
  std::vector<int> peers;
  for (size_t i = plan.round_begin[round]; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool transfer = s.kind == StepKind::send || s.kind == StepKind::recv || s.kind == StepKind::recv_reduce ||
                          s.kind == StepKind::recv_reduce_send;
    if (transfer && !links_of(kind)[static_cast<size_t>(s.peer)]) peers.push_back(s.peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  if (kind != MemoryKind::host && !connector_.device_allowed())
    throw InternalError(std::string("a plan on ") + name(kind) +
                        " memory addresses ranks whose links were not made "
                        "before the call held its stream");
  for (int p : peers) connector_.want(p, kind);
  wait_until([&] { return connected_or_raise(peers, kind); },
             [&](std::vector<int>& w) {
               for (int p : peers)
                 if (!connector_.ready(p, kind)) w.push_back(p);
             });
}

// Moves the connector (and a round's transfers already posted, whose peers may wait for
// them before they can take our connection) until `done()` (connections made, the
// executor settled), with the failure protocol of wait_links: a stall reads the control
// sockets, and past STRATA_TIMEOUT probes the peers.
template <class Done, class Waited>
void Engine::wait_until(const Done& done, const Waited& waited) {
  Clock::time_point last_progress = Clock::now();
  ControlChannel::Watch watch;
  bool stalled = false;
  std::vector<pollfd> fds;
  for (;;) {
    bool moved = connector_.progress();
    for (Link* l : active_)
      if (!l->idle()) moved |= l->progress();
    if (done()) return;
    const auto now = Clock::now();
    if (moved) {
      last_progress = now;
      stalled = false;
      continue;
    }
    if (!stalled) {
      stalled = true;
      watch.stall_begins(now);
    }
    waited_.clear();
    waited(waited_);
    control_.on_stall(watch, now, last_progress, waited_);
    fds.clear();
    control_.wait_fds(fds);
    if (::poll(fds.data(), fds.size(), 1) > 0) control_.check_now();
  }
}

Executor& Engine::first_executor(MemoryKind kind) {
  return *(executors_[static_cast<size_t>(kind)] = make_executor(kind));
}

void Engine::throw_no_link(int peer, MemoryKind kind) const {
  if (peer == rank_) throw InternalError("plan step addresses this rank itself");
  throw InvalidUsage(std::string("no transport carries ") + name(kind) + " memory between rank " +
                     std::to_string(rank_) + " and rank " + std::to_string(peer));
}

// Progress until every link of the round is idle. Spinning is cheapest while data flows;
// when nothing moves we spin a while (WaitPolicy: not at all where the peer needs this
// CPU), then yield, then sleep in poll() (tcp) or short naps (shared memory), so ranks
// that outnumber the cores do not starve the ones doing the work.
void Engine::wait_links() {
  // The clock is read only once the links stall: a small call that completes while
  // spinning never pays for it.
  Clock::time_point last_progress;
  ControlChannel::Watch watch;
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
        if (control_.left(l->peer())) throw control_.departed(l->peer());
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
      watch.stall_begins(now);
    }
    waited_.clear();
    for (Link* l : active_)
      if (!l->idle()) waited_.push_back(l->peer());
    control_.on_stall(watch, now, last_progress, waited_);
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

}  // namespace strata
