// Comm: validates arguments, orders operations, picks an algorithm, and hands the plan
// to the engine.
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <map>
#include <tuple>

#include "algorithms/algorithms.hpp"
#include "algorithms/tuner.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/comm_info.hpp"
#include "core/engine.hpp"
#include "ground/log.hpp"
#include "ground/reduce.hpp"
#include "strata/strata.hpp"
#include "ground/validate.hpp"

namespace strata {

struct Request::Op {
  std::function<void()> run;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void complete(std::exception_ptr e) {
    std::lock_guard lk(m);
    error = e;
    done = true;
    cv.notify_all();
  }
};

void Request::wait() {
  if (!op_) return;  // an empty request (e.g. send_async inside a group) is already done
  std::unique_lock lk(op_->m);
  op_->cv.wait(lk, [&] { return op_->done; });
  if (op_->error) std::rethrow_exception(op_->error);
}

bool Request::test() {
  if (!op_) return true;
  std::lock_guard lk(op_->m);
  if (!op_->done) return false;
  if (op_->error) std::rethrow_exception(op_->error);
  return true;
}

namespace {

struct P2P {
  bool is_send;
  char* buf;
  size_t bytes;
  int peer;
};

net::Fd listen_like(const net::SockAddr& advertised) {
  net::SockAddr any;
  any.ss.ss_family = advertised.ss.ss_family;
  any.len = advertised.ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return net::listen_on(any);
}

uint64_t mix(uint64_t x) {  // splitmix64: spreads split tags so sub-communicators differ
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// `emulated_node` >= 0 (STRATA_HIERARCHY sets node sizes) makes this rank's host
// identity differ per emulated node, so those talk over tcp as separate hosts would.
bootstrap::RankInfo my_info(const Config& cfg, const net::Fd& listener, int emulated_node) {
  bootstrap::RankInfo info{};
  info.listen = net::local_address(listener.get());
  std::string host = bootstrap::host_identity();
  if (emulated_node >= 0) host += "/emulated-node-" + std::to_string(emulated_node);
  std::snprintf(info.host, sizeof info.host, "%s", host.c_str());
  info.tcp_nsocks = cfg.tcp_nsocks;
  info.force_tcp = cfg.transport == "tcp";
  std::snprintf(info.machine, sizeof info.machine, "%s", bootstrap::machine_identity().c_str());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) CPU_SET(0, &set);  // unknown: count one CPU
  for (int c = 0; c < CPU_SETSIZE && c < 64 * 16; ++c)
    if (CPU_ISSET(c, &set)) info.cpus[c / 64] |= uint64_t{1} << (c % 64);
  return info;
}

}  // namespace

struct CommState {
  enum Life { live, destroyed, aborted };

  int rank = 0, nranks = 1;
  Config cfg;
  bootstrap::Secret secret{};
  uint64_t tag = 1;
  uint64_t splits = 0;
  std::vector<bootstrap::RankInfo> table;
  Hierarchy hier;
  std::unique_ptr<Engine> engine;
  std::vector<char> scratch;
  // Plans by (collective, count, element size, root, in place, forward): calls repeat.
  struct CachedPlan {
    Plan plan;
    StoreChooser stores;  // learnt over this plan's calls
  };
  using PlanKey = std::tuple<int, size_t, size_t, int, bool, bool>;
  std::map<PlanKey, CachedPlan> plans;
  // The last plan used: a loop repeating one call skips the map search.
  PlanKey last_key{-1, 0, 0, 0, false, false};
  CachedPlan* last_plan = nullptr;
  // Grouped send/receive plans are made per call; their store choice is learnt by the
  // bytes the group sends (map nodes stay put: an asynchronous call may hold one).
  std::map<size_t, StoreChooser> p2p_stores;

  // Operations run one at a time: `busy` is taken by whoever runs one (the worker, or a
  // blocking call on its caller's thread). The queue is guarded by qm; `queued` mirrors
  // its size and `waiters` counts threads waiting on qcv for `busy` to drop, so a
  // blocking call with nothing queued takes neither the mutex nor a syscall.
  std::mutex qm;
  std::condition_variable qcv;
  std::deque<std::shared_ptr<Request::Op>> queue;
  std::atomic<size_t> queued{0};
  std::atomic<bool> busy{false};
  std::atomic<int> waiters{0};
  bool stop = false;
  std::thread worker;
  std::atomic<Life> life{live};

  int group_depth = 0;
  std::vector<P2P> group;

  ~CommState() {
    if (life.load() == live) shutdown(true);
  }

  static const CommState& of(const Comm& c) { return c.checked(); }

  static Comm create(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table, const net::Fd& listener,
                     const bootstrap::Secret& secret, uint64_t tag, const Config& cfg,
                     const std::vector<LevelSpec>& spec) {
    auto s = std::make_shared<CommState>();
    std::vector<std::string> hosts;
    for (const auto& info : table) hosts.emplace_back(info.host);
    s->hier = build_hierarchy(hosts, spec, env_string("STRATA_LINK_MODEL").value_or(""));
    std::vector<RankCpus> cpus;
    for (const auto& info : table) cpus.push_back({info.machine, std::vector<uint64_t>(std::begin(info.cpus), std::end(info.cpus))});
    s->hier.oversubscribed = oversubscribed(cpus);
    if (rank == 0) STRATA_INFO("hierarchy: %s%s", s->hier.describe().c_str(),
                               s->hier.oversubscribed ? "; more ranks than CPUs on a machine (the tuner avoids pipelined chains; idle ranks yield at once)" : "");
    s->rank = rank;
    s->nranks = nranks;
    s->cfg = cfg;
    s->secret = secret;
    s->tag = tag;
    s->table = table;
    Mesh mesh = connect_mesh(rank, table, listener, secret, tag, cfg, net::deadline_after(cfg.timeout_s));
    s->engine = std::make_unique<Engine>(rank, nranks, std::move(mesh), cfg, s->hier.oversubscribed);
    return Comm(s);
  }

  // ---- ordering: operations run one at a time, in the order they were issued ----

  void worker_loop() {
    log::set_thread_rank(rank);
    std::unique_lock lk(qm);
    for (;;) {
      qcv.wait(lk, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      wait_not_busy(lk, [] { return true; });
      if (queue.empty()) continue;  // an abort dropped it while we waited
      bool idle = false;
      if (!busy.compare_exchange_strong(idle, true)) continue;  // a blocking call got in first
      auto op = queue.front();
      queue.pop_front();
      queued.store(queue.size());
      lk.unlock();
      op->complete(run_caught(op->run));
      lk.lock();
      busy.store(false);
      qcv.notify_all();
    }
  }

  // Waits under qm until `busy` is clear and `also()` holds. Counted in `waiters` while
  // it waits, so whoever clears `busy` without the mutex knows to wake it. (Sequentially
  // consistent: either the clearer sees the count, or the waiter sees `busy` clear.)
  template <class Pred>
  void wait_not_busy(std::unique_lock<std::mutex>& lk, const Pred& also) {
    waiters.fetch_add(1);
    qcv.wait(lk, [&] { return !busy.load() && also(); });
    waiters.fetch_sub(1);
  }

  template <class Fn>
  static std::exception_ptr run_caught(const Fn& fn) {
    try {
      fn();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }

  Request submit(std::function<void()> fn) {
    auto op = std::make_shared<Request::Op>();
    op->run = std::move(fn);
    std::lock_guard lk(qm);
    if (!worker.joinable()) worker = std::thread([this] { worker_loop(); });
    queue.push_back(op);
    queued.store(queue.size());
    qcv.notify_all();
    return Request(op);
  }

  // A blocking call runs on the caller's thread when nothing is queued before it.
  // A template, not std::function: a blocking call's closure is not allocated per call.
  // An operation this thread queued earlier is counted in `queued` before submit returns,
  // so it always runs first; against other threads' calls no order is promised.
  template <class Fn>
  void run_now(const Fn& fn) {
    bool idle = false;
    if (queued.load() != 0 || !busy.compare_exchange_strong(idle, true)) {
      submit(fn).wait();
      return;
    }
    std::exception_ptr e = run_caught(fn);
    busy.store(false);
    if (waiters.load() != 0) {
      std::lock_guard lk(qm);
      qcv.notify_all();
    }
    if (e) std::rethrow_exception(e);
  }

  void drain() {
    std::unique_lock lk(qm);
    wait_not_busy(lk, [&] { return queue.empty(); });
  }

  void stop_worker() {
    {
      std::lock_guard lk(qm);
      stop = true;
      qcv.notify_all();
    }
    if (worker.joinable()) worker.join();
  }

  void shutdown(bool goodbye) {
    drain();
    stop_worker();
    if (engine && goodbye) engine->say_goodbye();
    engine.reset();
  }

  void abort_now() {
    life.store(aborted);
    if (engine) engine->abort();
    std::deque<std::shared_ptr<Request::Op>> dropped;
    {
      std::lock_guard lk(qm);
      dropped.swap(queue);
      queued.store(0);
      stop = true;
      qcv.notify_all();
    }
    auto err = std::make_exception_ptr(InvalidUsage("the communicator was aborted before this operation ran"));
    for (auto& op : dropped) op->complete(err);
    drain();  // an operation running now fails promptly: the engine sees the abort
    if (worker.joinable()) worker.join();
    engine.reset();
  }

  // ---- collectives ----

  void execute(Collective coll, const void* in, void* out, size_t count, DataType type, ReduceOp op, int root,
               bool in_place) {
    log::set_thread_rank(rank);
    CachedPlan& cached = plan_for(coll, count, size_of(type), root, in_place, type, op);
    size_t need = cached.plan.scratch_count * size_of(type);
    if (scratch.size() < need) scratch.resize(need);
    StoreChooser* stores = count * size_of(type) >= StoreChooser::kMinBytes ? &cached.stores : nullptr;
    engine->execute(cached.plan, Buffers{in, out, scratch.data()}, type, op, stores);
  }

  // The tuner's (or STRATA_ALGO's) plan for this call, built once per distinct call.
  CachedPlan& plan_for(Collective coll, size_t count, size_t esz, int root, bool in_place, DataType type, ReduceOp op) {
    // Two ranks share one link, the same transport on both sides: they agree on `forward`.
    const bool forward = nranks == 2 && !has_finalize(op) && engine->links_forward();
    const PlanKey key{static_cast<int>(coll), count, esz, root, in_place, forward};
    if (last_plan && key == last_key) return *last_plan;
    if (auto it = plans.find(key); it != plans.end()) {
      STRATA_TRACE("%s: %zu x %s, cached plan %s", name(coll), count, name(type), it->second.plan.algo);
      last_key = key;
      return *(last_plan = &it->second);
    }
    CollArgs a{coll, count, esz, root, rank, nranks, in_place, std::max<size_t>(1, cfg.chunk_bytes / esz), &hier, forward};
    Choice choice = tune(a);
    const char* why = "tuner";
    if (!cfg.algo.empty()) {
      why = "STRATA_ALGO does not apply; tuner";
      for (Algo forced : kAllAlgos)
        if (cfg.algo == name(forced) && supports(forced, coll)) choice.algo = forced, why = "STRATA_ALGO";
    }
    if (choice.chunk_bytes && !env_string("STRATA_CHUNK_BYTES")) a.chunk_count = std::max<size_t>(1, choice.chunk_bytes / esz);
    Plan plan = build_plan(choice.algo, a);
    STRATA_INFO("%s: %zu x %s %s root %d: %s (%s), predicted %.1f us, %zu rounds", name(coll), count, name(type),
                name(op), root, plan.algo, why, predict(choice.algo, a) * 1e6, plan.rounds());
    if (plans.size() >= 256) plans.clear();  // bounded: sizes sweeps should not grow it forever
    last_key = key;
    return *(last_plan = &plans.emplace(key, CachedPlan{std::move(plan), {}}).first->second);
  }

  Request collective(bool blocking, const char* call, Collective coll, const void* in, void* out, size_t count,
                     DataType type, ReduceOp op, int root, bool in_place) {
    if (group_depth > 0) throw InvalidUsage(std::string(call) + ": collectives cannot be called inside group_start/group_end");
    auto fn = [=, this] { execute(coll, in, out, count, type, op, root, in_place); };
    if (count == 0 && coll != Collective::barrier) return {};
    if (blocking) {
      run_now(fn);
      return {};
    }
    return submit(fn);
  }

  // ---- point-to-point ----

  Request p2p(bool blocking, const char* call, bool is_send, const void* buf, size_t count, DataType type, int peer) {
    check::type(call, type);
    check::count(call, count, type, 1);
    check::buffer(call, "buffer", buf, count);
    check::peer(call, peer, nranks);
    P2P p{is_send, const_cast<char*>(static_cast<const char*>(buf)), count * size_of(type), peer};
    if (group_depth > 0) {
      group.push_back(p);
      return {};
    }
    if (peer == rank)
      throw InvalidArgument(std::string(call) + ": peer is this rank itself; outside a group that would never complete");
    return run_group(blocking, {p});
  }

  Request run_group(bool blocking, std::vector<P2P> ops) {
    Plan plan = p2p_plan(ops);
    if (plan.steps.empty()) return {};
    size_t sent = 0;
    for (const P2P& p : ops)
      if (p.is_send) sent += p.bytes;
    StoreChooser* stores = sent >= StoreChooser::kMinBytes ? &p2p_stores[sent] : nullptr;
    auto fn = [this, plan = std::move(plan), stores] {
      log::set_thread_rank(rank);
      STRATA_INFO("grouped send/recv: %zu steps", plan.steps.size());
      engine->execute(plan, Buffers{nullptr, nullptr, nullptr}, DataType::uint8, ReduceOp::sum, stores);
    };
    if (blocking) {
      run_now(fn);
      return {};
    }
    return submit(fn);
  }

  // One round: every transfer is posted at once. Sends to self meet receives from self in
  // the order they were posted and become copies.
  Plan p2p_plan(const std::vector<P2P>& ops) {
    Plan plan;
    plan.algo = "p2p";
    plan.new_round();
    std::vector<const P2P*> self_sends, self_recvs;
    for (const P2P& p : ops) {
      Ref at{Buf::absolute, reinterpret_cast<uintptr_t>(p.buf)};
      if (p.peer == rank) (p.is_send ? self_sends : self_recvs).push_back(&p);
      else if (p.is_send) plan.send(p.peer, at, p.bytes);
      else plan.recv(p.peer, at, p.bytes);
    }
    if (self_sends.size() != self_recvs.size())
      throw InvalidArgument("group_end: " + std::to_string(self_sends.size()) + " sends to self but " +
                            std::to_string(self_recvs.size()) + " receives from self");
    for (size_t i = 0; i < self_sends.size(); ++i) {
      if (self_sends[i]->bytes != self_recvs[i]->bytes)
        throw InvalidArgument("group_end: a send to self and its matching receive differ in size");
      plan.copy({Buf::absolute, reinterpret_cast<uintptr_t>(self_sends[i]->buf)},
                {Buf::absolute, reinterpret_cast<uintptr_t>(self_recvs[i]->buf)}, self_sends[i]->bytes);
    }
    return plan;
  }
};

std::string describe_hierarchy(const Comm& c) { return CommState::of(c).hier.describe(); }

std::string describe_links(const Comm& c) {
  const CommState& s = CommState::of(c);
  std::string out = std::string("host ") + s.table[s.rank].host + ";";
  for (int j = 0; j < s.nranks; ++j)
    if (j != s.rank) out += " " + std::to_string(j) + ":" + s.engine->link_name(j);
  return out;
}

// ---- creation ----

UniqueId get_unique_id() {
  Config cfg = Config::from_env();
  bootstrap::IdFields f;
  f.root = net::interface_address(env_string("STRATA_SOCKET_IFNAME").value_or(""));
  net::Fd listener = net::listen_on(f.root);
  f.root.set_port(net::local_address(listener.get()).port());
  f.secret = bootstrap::random_secret();
  bootstrap::start_root(std::move(listener), f.secret, cfg.timeout_s);
  STRATA_INFO("bootstrap root listening on %s", f.root.str().c_str());
  return bootstrap::encode_id(f);
}

static Comm init(int nranks, int rank, const net::SockAddr& root, const bootstrap::Secret& secret) {
  if (nranks < 1) throw InvalidArgument("nranks must be at least 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    throw InvalidArgument("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  log::set_thread_rank(rank);
  Config cfg = Config::from_env();
  auto spec = parse_hierarchy_spec(env_string("STRATA_HIERARCHY").value_or(""));
  net::Fd listener = listen_like(root);
  auto table = bootstrap::join(root, secret, rank, nranks, my_info(cfg, listener, emulated_node(spec, rank)),
                               net::deadline_after(cfg.timeout_s));
  Comm c = CommState::create(rank, nranks, table, listener, secret, 1, cfg, spec);
  STRATA_INFO("communicator ready: rank %d of %d, host %s", rank, nranks, table[rank].host);
  return c;
}

Comm Comm::init_rank(int nranks, const UniqueId& id, int rank) {
  bootstrap::IdFields f = bootstrap::decode_id(id);
  return init(nranks, rank, f.root, f.secret);
}

Comm Comm::init_from_env() {
  auto rank_s = env_string("STRATA_RANK"), size_s = env_string("STRATA_WORLD_SIZE");
  if (!rank_s || !size_s) throw InvalidArgument("init_from_env: STRATA_RANK and STRATA_WORLD_SIZE must be set");
  int nranks = static_cast<int>(env_int("STRATA_WORLD_SIZE", 1, 1, 1 << 24));
  int rank = static_cast<int>(env_int("STRATA_RANK", 0, 0, nranks - 1));
  auto root_s = env_string("STRATA_ROOT");
  if (!root_s) throw InvalidArgument("init_from_env: STRATA_ROOT=host:port must be set");
  net::SockAddr root = net::parse_host_port(*root_s);
  bootstrap::Secret secret{};
  if (auto hex = env_string("STRATA_SECRET")) {
    secret = bootstrap::parse_secret_hex(*hex);
  } else {
    STRATA_WARN("STRATA_SECRET is not set: connections are checked against an all-zero secret");
  }
  if (rank == 0) bootstrap::start_root(net::listen_on(root), secret, Config::from_env().timeout_s);
  return init(nranks, rank, root, secret);
}

// ---- the handle ----

CommState& Comm::checked() const {
  if (!state_) throw InvalidUsage("this communicator is null (default-constructed, or a split with a negative color)");
  switch (state_->life.load()) {
    case CommState::live: return *state_;
    case CommState::destroyed: throw InvalidUsage("this communicator was destroyed");
    case CommState::aborted: throw InvalidUsage("this communicator was aborted");
  }
  return *state_;
}

int Comm::rank() const { return checked().rank; }
int Comm::size() const { return checked().nranks; }

void Comm::destroy() {
  CommState& s = checked();
  s.life.store(CommState::destroyed);
  s.shutdown(true);
}

void Comm::abort() { checked().abort_now(); }

Comm Comm::split(int color, int key) {
  CommState& s = checked();
  if (s.group_depth > 0) throw InvalidUsage("split: not allowed inside group_start/group_end");
  struct Entry {
    int32_t color, key;
    bootstrap::RankInfo info;
  };
  net::Fd listener = listen_like(s.table[s.rank].listen);
  Entry mine{color, key, s.table[s.rank]};
  mine.info.listen = s.table[s.rank].listen;  // same address as in the parent, new port
  mine.info.listen.set_port(net::local_address(listener.get()).port());
  std::vector<Entry> all(static_cast<size_t>(s.nranks));
  s.collective(true, "split", Collective::all_gather, &mine, all.data(), sizeof(Entry), DataType::uint8, ReduceOp::sum, 0,
               false);
  uint64_t tag = mix(s.tag ^ mix(++s.splits) ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(color))));
  if (color < 0) return Comm();
  std::vector<int> members;
  for (int r = 0; r < s.nranks; ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  std::vector<bootstrap::RankInfo> table;
  int new_rank = -1;
  for (int r : members) {
    if (r == s.rank) new_rank = static_cast<int>(table.size());
    table.push_back(all[r].info);
  }
  STRATA_INFO("split: color %d key %d -> rank %d of %zu", color, key, new_rank, table.size());
  // Nodes come from host identities (emulated nodes included); STRATA_HIERARCHY's upper
  // levels describe the world's ranks, not a subset's.
  return CommState::create(new_rank, static_cast<int>(table.size()), table, listener, s.secret, tag, s.cfg, {});
}

// ---- collectives: validation, then one shared path ----

namespace {
bool same(const void* a, const void* b) { return a == b; }
const char* offset(const void* p, size_t elems, DataType t) {
  return p ? static_cast<const char*>(p) + elems * size_of(t) : nullptr;
}
}  // namespace

namespace {
Request all_reduce_impl(CommState& s, bool blocking, const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  const char* call = "all_reduce";
  check::type(call, type);
  check::count(call, count, type, 1);
  check::op(call, op);
  check::buffer(call, "send buffer", send, count);
  check::buffer(call, "recv buffer", recv, count);
  size_t bytes = count * size_of(type);
  check::in_place_or_disjoint(call, send, bytes, recv, bytes, send);
  return s.collective(blocking, call, Collective::all_reduce, send, recv, count, type, op, 0, same(send, recv));
}

Request reduce_scatter_impl(CommState& s, bool blocking, const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op) {
  const char* call = "reduce_scatter";
  check::type(call, type);
  check::count(call, recvcount, type, static_cast<size_t>(s.nranks));
  check::op(call, op);
  check::buffer(call, "send buffer", send, recvcount);
  check::buffer(call, "recv buffer", recv, recvcount);
  const void* in_place = offset(send, recvcount * static_cast<size_t>(s.rank), type);
  check::in_place_or_disjoint(call, send, recvcount * s.nranks * size_of(type), recv, recvcount * size_of(type), in_place);
  return s.collective(blocking, call, Collective::reduce_scatter, send, recv, recvcount, type, op, 0, same(recv, in_place));
}

Request all_gather_impl(CommState& s, bool blocking, const void* send, void* recv, size_t sendcount, DataType type) {
  const char* call = "all_gather";
  check::type(call, type);
  check::count(call, sendcount, type, static_cast<size_t>(s.nranks));
  check::buffer(call, "send buffer", send, sendcount);
  check::buffer(call, "recv buffer", recv, sendcount);
  const void* in_place_send = offset(recv, sendcount * static_cast<size_t>(s.rank), type);
  // In place means the send buffer is this rank's slot of the receive buffer.
  check::in_place_or_disjoint(call, recv, sendcount * s.nranks * size_of(type), send, sendcount * size_of(type),
                              in_place_send);
  return s.collective(blocking, call, Collective::all_gather, send, recv, sendcount, type, ReduceOp::sum, 0,
                      same(send, in_place_send));
}

Request broadcast_impl(CommState& s, bool blocking, const void* send, void* recv, size_t count, DataType type, int root) {
  const char* call = "broadcast";
  check::type(call, type);
  check::count(call, count, type, 1);
  check::root(call, root, s.nranks);
  if (s.rank == root) check::buffer(call, "send buffer", send, count);
  check::buffer(call, "recv buffer", recv, count);
  size_t bytes = count * size_of(type);
  if (s.rank == root) check::in_place_or_disjoint(call, send, bytes, recv, bytes, send);
  return s.collective(blocking, call, Collective::broadcast, send, recv, count, type, ReduceOp::sum, root, same(send, recv));
}

Request reduce_impl(CommState& s, bool blocking, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  const char* call = "reduce";
  check::type(call, type);
  check::count(call, count, type, 1);
  check::op(call, op);
  check::root(call, root, s.nranks);
  check::buffer(call, "send buffer", send, count);
  if (s.rank == root) {
    check::buffer(call, "recv buffer", recv, count);
    size_t bytes = count * size_of(type);
    check::in_place_or_disjoint(call, send, bytes, recv, bytes, send);
  }
  return s.collective(blocking, call, Collective::reduce, send, recv, count, type, op, root, same(send, recv));
}

Request all_to_all_impl(CommState& s, bool blocking, const void* send, void* recv, size_t count, DataType type) {
  const char* call = "all_to_all";
  check::type(call, type);
  check::count(call, count, type, static_cast<size_t>(s.nranks));
  check::buffer(call, "send buffer", send, count);
  check::buffer(call, "recv buffer", recv, count);
  size_t bytes = count * s.nranks * size_of(type);
  check::in_place_or_disjoint(call, send, bytes, recv, bytes, send);
  return s.collective(blocking, call, Collective::all_to_all, send, recv, count, type, ReduceOp::sum, 0, same(send, recv));
}

Request barrier_impl(CommState& s, bool blocking) {
  return s.collective(blocking, "barrier", Collective::barrier, nullptr, nullptr, 1, DataType::uint8, ReduceOp::sum, 0, false);
}

Request send_impl(CommState& s, bool blocking, const void* buf, size_t count, DataType type, int peer) {
  return s.p2p(blocking, "send", true, buf, count, type, peer);
}

Request recv_impl(CommState& s, bool blocking, void* buf, size_t count, DataType type, int peer) {
  return s.p2p(blocking, "recv", false, buf, count, type, peer);
}

}  // namespace

Request Comm::all_reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  return all_reduce_impl(checked(), false, send, recv, count, type, op);
}
void Comm::all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  all_reduce_impl(checked(), true, send, recv, count, type, op);
}
Request Comm::reduce_scatter_async(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op) {
  return reduce_scatter_impl(checked(), false, send, recv, recvcount, type, op);
}
void Comm::reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op) {
  reduce_scatter_impl(checked(), true, send, recv, recvcount, type, op);
}
Request Comm::all_gather_async(const void* send, void* recv, size_t sendcount, DataType type) {
  return all_gather_impl(checked(), false, send, recv, sendcount, type);
}
void Comm::all_gather(const void* send, void* recv, size_t sendcount, DataType type) {
  all_gather_impl(checked(), true, send, recv, sendcount, type);
}
Request Comm::broadcast_async(const void* send, void* recv, size_t count, DataType type, int root) {
  return broadcast_impl(checked(), false, send, recv, count, type, root);
}
void Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  broadcast_impl(checked(), true, send, recv, count, type, root);
}
Request Comm::reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  return reduce_impl(checked(), false, send, recv, count, type, op, root);
}
void Comm::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  reduce_impl(checked(), true, send, recv, count, type, op, root);
}
Request Comm::all_to_all_async(const void* send, void* recv, size_t count, DataType type) {
  return all_to_all_impl(checked(), false, send, recv, count, type);
}
void Comm::all_to_all(const void* send, void* recv, size_t count, DataType type) {
  all_to_all_impl(checked(), true, send, recv, count, type);
}
Request Comm::barrier_async() { return barrier_impl(checked(), false); }
void Comm::barrier() { barrier_impl(checked(), true); }
Request Comm::send_async(const void* buf, size_t count, DataType type, int peer) {
  return send_impl(checked(), false, buf, count, type, peer);
}
void Comm::send(const void* buf, size_t count, DataType type, int peer) { send_impl(checked(), true, buf, count, type, peer); }
Request Comm::recv_async(void* buf, size_t count, DataType type, int peer) {
  return recv_impl(checked(), false, buf, count, type, peer);
}
void Comm::recv(void* buf, size_t count, DataType type, int peer) { recv_impl(checked(), true, buf, count, type, peer); }

void Comm::group_start() { ++checked().group_depth; }

static Request group_end_impl(CommState& s, bool blocking) {
  if (s.group_depth == 0) throw InvalidUsage("group_end without group_start");
  if (--s.group_depth > 0) return {};
  std::vector<P2P> ops;
  ops.swap(s.group);
  return s.run_group(blocking, std::move(ops));
}

Request Comm::group_end_async() { return group_end_impl(checked(), false); }
void Comm::group_end() { group_end_impl(checked(), true); }

}  // namespace strata
