// The communicator's calls: each API call is described once (ground/call.hpp), checked,
// ordered by the operation queue, planned through the plan cache and run by the engine.
// Creation and split are in core/comm_create.cpp.
#include <algorithm>
#include <cstring>
#include <utility>

#include "algorithms/choice.hpp"
#include "core/comm_info.hpp"
#include "core/comm_state.hpp"
#include "ground/log.hpp"
#include "ground/reduce.hpp"

namespace strata {

// ---- running one call ----

Request CommState::start(Call call, bool blocking) {
  throw_async_error();
  const bool p2p = call.coll == Collective::send || call.coll == Collective::recv;
  if (!p2p && group_depth > 0) call.fault = Fault::in_group;
  // STRATA_CHECK sends buffer faults with the call's description, so every rank fails the
  // call and the communicator stays usable; the others need a peer and a call to send with.
  const bool sent_with_check = cfg.check && (call.fault == Fault::null_buffer || call.fault == Fault::overlap);
  if (p2p) {
    P2POp p{call.coll == Collective::send,
            static_cast<char*>(const_cast<void*>(call.coll == Collective::send ? call.send : call.recv)), call.bytes(),
            call.root};
    if (group_depth > 0) {
      if (call.fault != Fault::none) {
        // Refused with the whole group at group_end; the caller learns of it now.
        if (group_fault == Fault::none) group_fault = call.fault, group_fault_what = fault_message(call, nranks);
        throw_fault(call.fault, fault_message(call, nranks) + " (the group will be refused at group_end)");
      }
      if (!group.empty() && call.memory != group_memory) {
        const std::string what = std::string(name(call.coll)) + ": a buffer of " + name(call.memory) +
                                 " memory in a group of " + name(group_memory) +
                                 " memory; a group's buffers must all be host or all device memory";
        if (group_fault == Fault::none) group_fault = Fault::mixed_memory, group_fault_what = what;
        throw_fault(Fault::mixed_memory, what + " (the group will be refused at group_end)");
      }
      group_memory = call.memory;
      if (call.memory == MemoryKind::device &&
          std::find(group_streams.begin(), group_streams.end(), call.stream) == group_streams.end())
        group_streams.push_back(call.stream);
      group.push_back(p);
      return {};
    }
    if (call.fault == Fault::none && p.peer == rank)
      throw InvalidArgument(std::string(name(call.coll)) +
                            ": peer is this rank itself; outside a group that would never complete");
    // A device call's fault is refused now, before its stream holds anything.
    if (call.fault != Fault::none && (!sent_with_check || call.memory == MemoryKind::device))
      refuse(call.fault, call.coll, fault_message(call, nranks), blocking);
    return run_group({p}, blocking, call.memory, {call.stream}, call.fault,
                     call.fault != Fault::none ? fault_message(call, nranks) : "");
  }
  if (call.fault != Fault::none && (!sent_with_check || call.memory == MemoryKind::device))
    refuse(call.fault, call.coll, fault_message(call, nranks), blocking);
  if (call.count == 0 && !cfg.check) return {};  // under STRATA_CHECK even an empty call is compared
  if (call.memory == MemoryKind::device) {
    Call run = call;
    if (run.coll == Collective::barrier) run.memory = MemoryKind::host;  // no data: its messages take the host links
    const size_t esz = size_of(call.type);
    const Call::PreMul* scale = call.premul.on ? &call.premul : nullptr;
    return on_streams({call.stream}, run.memory == MemoryKind::device ? device_peers(run) : std::vector<int>{},
                      {{call.send, call.geo.send_count * esz, true, false, scale, call.type},
                       {call.recv, call.geo.recv_count * esz, false, true}},
                      [this, run](const std::vector<void*>& moved) {
                        Call staged = run;
                        staged.send = moved[0];
                        staged.recv = moved[1];
                        execute(staged);
                      },
                      blocking);
  }
  auto fn = [this, call] { execute(call); };
  if (!blocking) return queue.submit(fn);
  queue.run_now(fn);
  return {};
}

void CommState::refuse(Fault fault, Collective coll, const std::string& what, bool blocking) {
  auto fn = [this, fault, coll, what] { refuse_here(fault, coll, what); };
  if (blocking) queue.run_now(fn);  // throws
  queue.submit(fn);  // the peers are told in issue order; the caller learns now
  throw_fault(fault, refusal_text(what));
}

void CommState::refuse_here(Fault fault, Collective coll, const std::string& what) {
  if (nranks > 1) engine->control().refuse(fault, coll, what);
  throw_fault(fault, refusal_text(what));
}

std::string CommState::refusal_text(const std::string& what) const {
  if (nranks == 1) return what;  // nobody to fall out of step with
  return what + "; the other ranks were told: the call fails on every rank, and the communicator can only be "
                "destroyed (with STRATA_CHECK=1 it stays usable)";
}

void CommState::execute(const Call& call) {
  log::set_thread_rank(rank);
  if (cfg.check) check_collective(call);
  if (call.count == 0) return;
  // Two ranks share one link, the same transport on both sides: they agree on `forward`.
  const bool forward = nranks == 2 && !has_finalize(call.op) && engine->forwards(1 - rank, call.memory);
  CachedPlan& cached = plans.get(PlanCache::key_of(call, forward), [&] { return build_plan_for(call, forward); });
  const size_t need = cached.plan.scratch_count * size_of(call.type);
  engine->execute(cached.plan, call, scratch.get(call.memory, need), cached.slot);
}

// The plan algorithms/choice.cpp chooses for this call (strata-sim makes the same choice).
PlanChoice plan_choice(const Hierarchy& hier, const Config& cfg, int rank, int nranks, const Call& call, bool forward) {
  const CollArgs a{call.coll, call.count, size_of(call.type), call.root, rank, nranks, call.in_place, 1, &hier,
                   forward, call.memory};
  return choose_plan(a, {cfg.algo, cfg.chunk_bytes, cfg.chunk_bytes_set});
}

Plan CommState::build_plan_for(const Call& call, bool forward) const {
  const PlanChoice choice = plan_choice(hier, cfg, rank, nranks, call, forward);
  Plan plan = build_plan(choice.algo, choice.args);
  STRATA_INFO("%s: %zu x %s %s root %d on %s memory: %s (%s), predicted %.1f us, %zu rounds", name(call.coll),
              call.count, name(call.type), name(call.op), call.root, name(call.memory), plan.algo, choice.why,
              choice.predicted_s * 1e6, plan.rounds());
  return plan;
}

Request CommState::run_group(std::vector<P2POp> ops, bool blocking, MemoryKind memory, std::vector<void*> streams,
                             Fault own, std::string own_what) {
  // On device memory a foreign send buffer is staged (core/call_staging.hpp); what a
  // receive writes is written here, by this rank's own link, so it is not.
  std::vector<CallStaging::Buffer> buffers;
  std::vector<int> peers;  // device: connected on the caller's thread
  if (memory == MemoryKind::device)
    for (const P2POp& p : ops) {
      buffers.push_back({p.is_send ? p.buf : nullptr, p.is_send ? p.bytes : 0, true, false});
      if (p.peer != rank) peers.push_back(p.peer);
    }
  auto fn = [this, ops = std::move(ops), own, own_what, memory](const std::vector<void*>& moved) {
    log::set_thread_rank(rank);
    std::vector<P2POp> staged = ops;
    for (size_t i = 0; i < moved.size(); ++i)
      if (moved[i]) staged[i].buf = static_cast<char*>(moved[i]);
    std::string disagreement;
    std::vector<P2POp> checked;
    if (cfg.check) checked = check_pairs(staged, own, disagreement);
    const std::vector<P2POp>& run = cfg.check ? checked : staged;
    Plan plan;
    try {
      plan = p2p_plan(run, rank);
    } catch (const InvalidArgument& e) {  // sends to self that do not pair up: this rank's own verdict
      refuse_here(Fault::self_group, Collective::send, e.what());
    }
    if (!plan.steps.empty()) {
      // The group runs as one call of the bytes it sends: its store choice is learnt by that.
      Call sent;
      sent.coll = Collective::send;
      sent.memory = memory;
      for (const P2POp& p : run)
        if (p.is_send) sent.count += p.bytes;
      // Once per size at INFO, as a collective's plan is: a line on every call would cost
      // each call microseconds (perf/scan runs at INFO for the tuner's predictions).
      bool first = false;
      std::unique_ptr<PlanSlot>& slot = plans.group_slot(sent.count, &first);
      if (first) STRATA_INFO("grouped send/recv: %zu steps, %zu bytes sent", plan.steps.size(), sent.count);
      else STRATA_TRACE("grouped send/recv: %zu steps, %zu bytes sent", plan.steps.size(), sent.count);
      engine->execute(plan, sent, nullptr, slot);
    }
    if (own != Fault::none) throw_fault(own, own_what + " (" + disagreement + ")");
    if (!disagreement.empty()) throw_fault(Fault::mismatch, disagreement);
  };
  if (memory == MemoryKind::device) return on_streams(streams, std::move(peers), buffers, fn, blocking);
  auto host = [fn = std::move(fn)] { fn({}); };
  if (!blocking) return queue.submit(host);
  queue.run_now(host);
  return {};
}

// ---- device calls: ordered with the users' streams ----

// The ranks a device collective's plan addresses, for connecting them on the caller's
// thread: the plan the worker will build (two ranks: the other one, forwarding or not),
// built here once per call shape.
std::vector<int> CommState::device_peers(const Call& call) {
  if (nranks == 1) return {};
  if (nranks == 2) return {1 - rank};
  std::lock_guard lk(peers_m);
  auto [it, fresh] = device_peers_of.try_emplace(PlanCache::key_of(call, false));
  if (fresh) it->second = plan_peers(build_plan_for(call, false));
  return it->second;
}

void CommState::keep_async_error(std::exception_ptr e) {
  std::lock_guard lk(async_m);
  if (async_error) return;
  async_error = e;
  has_async_error.store(true);
}

void CommState::shutdown(bool goodbye) {
  queue.stop();
  if (device_calls) device_calls->release_all();
  if (engine && goodbye) engine->control().say_goodbye();
  engine.reset();
}

void CommState::abort_now() {
  life.store(aborted);
  if (engine) engine->control().abort();  // an operation running now fails promptly
  queue.abort(std::make_exception_ptr(InvalidUsage("the communicator was aborted before this operation ran")));
  if (device_calls) device_calls->release_all();  // calls that never ran hold no stream
  engine.reset();
}

// ---- the handle ----

CommState& Comm::checked() const {
  if (!state_) throw InvalidUsage("this communicator is null (default-constructed, or a split with kSplitNoColor)");
  switch (state_->life.load()) {
    case CommState::live: return *state_;
    case CommState::destroyed: throw InvalidUsage("this communicator was destroyed");
    case CommState::aborted: throw InvalidUsage("this communicator was aborted");
  }
  return *state_;
}

int Comm::rank() const { return checked().rank; }
int Comm::size() const { return checked().nranks; }

std::vector<HierarchyLevel> Comm::hierarchy() const {
  std::vector<HierarchyLevel> out;
  for (const Level& l : checked().hier.levels) out.push_back({l.name, l.group});
  return out;
}

void Comm::destroy() {
  CommState& s = checked();
  s.life.store(CommState::destroyed);
  s.shutdown(true);
}

void Comm::abort() { checked().abort_now(); }

std::string describe_hierarchy(const Comm& c) { return CommState::of(c).hier.describe(); }

Connections connections(const Comm& c) {
  const CommState& s = CommState::of(c);
  Connections out;
  out.control = static_cast<int>(s.engine->connector().connected_peers());
  for (const auto& l : s.engine->connector().links(MemoryKind::host))
    if (l) ++out.host_links[l->name()];
  return out;
}

std::string describe_links(Comm& c) {
  CommState& s = const_cast<CommState&>(CommState::of(c));  // tools hold no CommState of their own
  std::vector<int> everyone;
  for (int j = 0; j < s.nranks; ++j) everyone.push_back(j);
  s.queue.run_now([&] { s.engine->connect(everyone, MemoryKind::host); });
  std::string out = std::string("host ") + s.table[s.rank].host + ";";
  for (int j = 0; j < s.nranks; ++j)
    if (j != s.rank) out += " " + std::to_string(j) + ":" + s.engine->link_name(j);
  return out;
}

// ---- the calls: described once, then one path ----

namespace {
void refuse_while_growing(const CommState& s) {
  if (s.growing.load())
    throw InvalidUsage("this communicator is being grown (Comm::grow, on another thread): a call on it meanwhile is "
                       "refused; make it before the grow, or on the communicator grow returns");
}
}  // namespace

Request Comm::start(bool blocking, Collective coll, const void* send, void* recv, size_t count, DataType type,
                    ReduceOp op, int root) {
  CommState& s = checked();
  refuse_while_growing(s);
  return s.start(describe(coll, send, recv, count, type, op, root, s.rank, s.nranks), blocking);
}

Request Comm::start_on(device::Stream stream, Collective coll, const void* send, void* recv, size_t count,
                       DataType type, ReduceOp op, int root, const PreMulSum* premul) {
  CommState& s = checked();
  Call call = describe(coll, send, recv, count, type, op, root, s.rank, s.nranks, true, stream);
  if (premul) {
    if (!premul->factor) throw InvalidArgument(std::string(name(coll)) + ": the pre-multiplied sum's factor is null");
    call.premul.on = true;
    if (device::kind_of(premul->factor) == MemoryKind::device) call.premul.device_factor = premul->factor;
    else std::memcpy(call.premul.value, premul->factor, size_of(type));
  }
  return s.start(call, false);
}

std::exception_ptr Comm::async_error() const { return checked().get_async_error(); }

void* Comm::register_buffer(void* buf, size_t bytes) { return checked().registrations.add(buf, bytes); }
void Comm::deregister_buffer(void* handle) { checked().registrations.remove(handle); }

Request Comm::all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, device::Stream st) {
  return start_on(st, Collective::all_reduce, send, recv, count, type, op, 0);
}
Request Comm::all_reduce(const void* send, void* recv, size_t count, DataType type, PreMulSum op, device::Stream st) {
  return start_on(st, Collective::all_reduce, send, recv, count, type, ReduceOp::sum, 0, &op);
}
Request Comm::reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, PreMulSum op,
                             device::Stream st) {
  return start_on(st, Collective::reduce_scatter, send, recv, recvcount, type, ReduceOp::sum, 0, &op);
}
Request Comm::reduce(const void* send, void* recv, size_t count, DataType type, PreMulSum op, int root,
                     device::Stream st) {
  return start_on(st, Collective::reduce, send, recv, count, type, ReduceOp::sum, root, &op);
}
Request Comm::reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op,
                             device::Stream st) {
  return start_on(st, Collective::reduce_scatter, send, recv, recvcount, type, op, 0);
}
Request Comm::all_gather(const void* send, void* recv, size_t sendcount, DataType type, device::Stream st) {
  return start_on(st, Collective::all_gather, send, recv, sendcount, type, ReduceOp::sum, 0);
}
Request Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root, device::Stream st) {
  return start_on(st, Collective::broadcast, send, recv, count, type, ReduceOp::sum, root);
}
Request Comm::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                     device::Stream st) {
  return start_on(st, Collective::reduce, send, recv, count, type, op, root);
}
Request Comm::all_to_all(const void* send, void* recv, size_t count, DataType type, device::Stream st) {
  return start_on(st, Collective::all_to_all, send, recv, count, type, ReduceOp::sum, 0);
}
Request Comm::barrier(device::Stream st) {
  return start_on(st, Collective::barrier, nullptr, nullptr, 1, DataType::uint8, ReduceOp::sum, 0);
}
Request Comm::send(const void* buf, size_t count, DataType type, int peer, device::Stream st) {
  return start_on(st, Collective::send, buf, nullptr, count, type, ReduceOp::sum, peer);
}
Request Comm::recv(void* buf, size_t count, DataType type, int peer, device::Stream st) {
  return start_on(st, Collective::recv, nullptr, buf, count, type, ReduceOp::sum, peer);
}

Request Comm::all_reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  return start(false, Collective::all_reduce, send, recv, count, type, op, 0);
}
void Comm::all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  start(true, Collective::all_reduce, send, recv, count, type, op, 0);
}
Request Comm::reduce_scatter_async(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op) {
  return start(false, Collective::reduce_scatter, send, recv, recvcount, type, op, 0);
}
void Comm::reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op) {
  start(true, Collective::reduce_scatter, send, recv, recvcount, type, op, 0);
}
Request Comm::all_gather_async(const void* send, void* recv, size_t sendcount, DataType type) {
  return start(false, Collective::all_gather, send, recv, sendcount, type, ReduceOp::sum, 0);
}
void Comm::all_gather(const void* send, void* recv, size_t sendcount, DataType type) {
  start(true, Collective::all_gather, send, recv, sendcount, type, ReduceOp::sum, 0);
}
Request Comm::broadcast_async(const void* send, void* recv, size_t count, DataType type, int root) {
  return start(false, Collective::broadcast, send, recv, count, type, ReduceOp::sum, root);
}
void Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  start(true, Collective::broadcast, send, recv, count, type, ReduceOp::sum, root);
}
Request Comm::reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  return start(false, Collective::reduce, send, recv, count, type, op, root);
}
void Comm::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  start(true, Collective::reduce, send, recv, count, type, op, root);
}
Request Comm::all_to_all_async(const void* send, void* recv, size_t count, DataType type) {
  return start(false, Collective::all_to_all, send, recv, count, type, ReduceOp::sum, 0);
}
void Comm::all_to_all(const void* send, void* recv, size_t count, DataType type) {
  start(true, Collective::all_to_all, send, recv, count, type, ReduceOp::sum, 0);
}
// A barrier is a call of one byte-sized element (its plan moves no data).
Request Comm::barrier_async() { return start(false, Collective::barrier, nullptr, nullptr, 1, DataType::uint8, ReduceOp::sum, 0); }
void Comm::barrier() { start(true, Collective::barrier, nullptr, nullptr, 1, DataType::uint8, ReduceOp::sum, 0); }
Request Comm::send_async(const void* buf, size_t count, DataType type, int peer) {
  return start(false, Collective::send, buf, nullptr, count, type, ReduceOp::sum, peer);
}
void Comm::send(const void* buf, size_t count, DataType type, int peer) {
  start(true, Collective::send, buf, nullptr, count, type, ReduceOp::sum, peer);
}
Request Comm::recv_async(void* buf, size_t count, DataType type, int peer) {
  return start(false, Collective::recv, nullptr, buf, count, type, ReduceOp::sum, peer);
}
void Comm::recv(void* buf, size_t count, DataType type, int peer) {
  start(true, Collective::recv, nullptr, buf, count, type, ReduceOp::sum, peer);
}

void Comm::group_start() { ++checked().group_depth; }

Request Comm::end_group(bool blocking) {
  CommState& s = checked();
  refuse_while_growing(s);
  if (s.group_depth == 0) throw InvalidUsage("group_end without group_start");
  if (--s.group_depth > 0) return {};
  std::vector<P2POp> ops;
  ops.swap(s.group);
  std::vector<void*> streams;
  streams.swap(s.group_streams);
  const MemoryKind memory = std::exchange(s.group_memory, MemoryKind::host);
  if (s.group_fault != Fault::none) {
    const Fault f = std::exchange(s.group_fault, Fault::none);
    s.refuse(f, Collective::send, "group_end: the group holds a refused call (" + s.group_fault_what + ")", blocking);
  }
  s.throw_async_error();
  return s.run_group(std::move(ops), blocking, memory, std::move(streams));
}
Request Comm::group_end_async() { return end_group(false); }
void Comm::group_end() { end_group(true); }

}  // namespace strata
