// What a communicator is made of. Its parts do not know each other: the operation queue
// (order), the plan cache (plans by call), the engine (runs a plan over the links); this
// struct is the glue that core/comm.cpp (the calls) and core/comm_create.cpp (creation,
// split) share.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "algorithms/choice.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/bootstrap/launch_env.hpp"
#include "core/engine.hpp"
#include "core/call_staging.hpp"
#include "core/op_queue.hpp"
#include "core/plan_cache.hpp"
#include "core/registrations.hpp"
#include "core/scratch.hpp"
#include "core/stream_order.hpp"
#include "ground/call.hpp"
#include "ground/settings.hpp"
#include "strata/strata.hpp"

namespace strata {

// Shared by creation, split and shrink (core/comm_create.cpp): a listener on the address
// family of `advertised`, any port; a hash that spreads derived communicators' tags.
net::Fd listen_like(const net::SockAddr& advertised);
uint64_t mix(uint64_t x);
std::vector<std::string> hosts_of(const std::vector<bootstrap::RankInfo>& table);
// The tuner's view of the ranks of `table` (creation, split, grow): their hosts, the
// emulated levels of `spec`, and the link models (tcp inside a node when a rank forces it).
Hierarchy hierarchy_of(const std::vector<bootstrap::RankInfo>& table, const std::vector<LevelSpec>& spec);
// The hierarchy a communicator over `table` gives its tuner: `h` (hierarchy_of, or a
// parent's restricted) and whether a machine runs more of its ranks than it has CPUs.
Hierarchy tuner_view(const std::vector<bootstrap::RankInfo>& table, Hierarchy h);
// The plan a communicator chooses for `call` (algorithms/choice.hpp, with its settings);
// `forward`: its links forward reductions for the call's memory (Engine::links_forward).
PlanChoice plan_choice(const Hierarchy& hier, const Config& cfg, int rank, int nranks, const Call& call, bool forward);
// Shared by creation and grow (core/grow.cpp): what this rank tells the others about itself
// (`emulated_node` >= 0: STRATA_HIERARCHY's node, which makes a host of its own); the root
// address and secret of a job whose rendezvous is an address, and that as an id.
bootstrap::RankInfo my_info(const Config& cfg, const net::Fd& listener, int emulated_node);
bootstrap::IdFields root_of(const bootstrap::Launch& l);
UniqueId rendezvous_id(const bootstrap::Launch& l);

struct Door;  // rank 0's listener for newcomers (core/grow.cpp)

struct CommState {
  enum Life { live, destroyed, aborted };

  int rank = 0, nranks = 1;
  Config cfg;
  bootstrap::Secret secret{};
  uint64_t tag = 1;
  uint64_t splits = 0;
  std::vector<bootstrap::RankInfo> table;
  Hierarchy hier;
  // Device calls, ordered with the users' streams (core/stream_order.hpp); destroyed after
  // the queue has stopped, releasing every stream still held.
  std::unique_ptr<DeviceCalls> device_calls;
  std::mutex peers_m;
  std::map<PlanCache::Key, std::vector<int>> device_peers_of;  // under peers_m: device_peers' answers
  std::unique_ptr<Engine> engine;
  Scratch scratch;  // what plans address as Buf::scratch, by memory kind
  PlanCache plans;
  Registrations registrations;  // Comm::register_buffer's handles
  OpQueue queue;  // after engine: destroyed (stopped) first
  std::atomic<Life> life{live};
  bool shrunk = false;  // Comm::shrink ran on it: its agreement is over, a second one has no peers
  std::shared_ptr<Door> door;       // rank 0, after open_door: where newcomers wait for a grow
  std::atomic<bool> growing{false};  // Comm::grow runs: calls from other threads are refused
  uint64_t grows = 0;

  int group_depth = 0;
  std::vector<P2POp> group;
  Fault group_fault = Fault::none;  // a send/recv of the open group was refused (the first)
  std::string group_fault_what;
  MemoryKind group_memory = MemoryKind::host;  // of the open group's buffers
  std::vector<void*> group_streams;            // device groups: the streams of its calls

  // The first failure of a device call, which ran after the call returned: the next call
  // throws it, and Comm::async_error() reports it (as ncclCommGetAsyncError).
  std::atomic<bool> has_async_error{false};
  std::mutex async_m;
  std::exception_ptr async_error;

  // STRATA_CHECK (core/call_check.cpp): collectives run so far, messages so far per peer
  // (sent to it, received from it), and the plan and engine slot of the exchanges.
  uint64_t calls = 0;
  std::vector<uint64_t> sent_to, received_from;
  std::unique_ptr<Plan> check_plan;
  std::unique_ptr<PlanSlot> check_slot;

  ~CommState() {
    if (life.load() == live) shutdown(true);
  }

  static const CommState& of(const Comm& c) { return c.checked(); }
  // The communicator over `table`'s ranks (core/comm_create.cpp): made, its listener
  // taking connections (with those it took before), nothing connected yet.
  static std::shared_ptr<CommState> make(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table,
                                         net::Incoming in, const bootstrap::Secret& secret,
                                         uint64_t tag, const Config& cfg, Hierarchy hier);
  // Connects the failure overlay (algorithms/connections.hpp): the control connections
  // every rank holds from the start, so a failure reaches every rank.
  void connect_overlay();
  // make, then connect_overlay.
  static Comm create(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table, net::Incoming in,
                     const bootstrap::Secret& secret, uint64_t tag, const Config& cfg, Hierarchy hier);
  // After a failure: the survivors agree on who is alive and connect anew (core/shrink.cpp).
  Comm shrink();

  // A described collective or point-to-point call: run now (blocking) or queued. A fault
  // (a check this rank failed alone) is refused on every rank (refuse) or, under
  // STRATA_CHECK, sent with the call's description.
  Request start(Call call, bool blocking);
  // A group of point-to-point transfers as one operation on `memory` (device: ordered on
  // `streams`); `own`: a fault of its only call.
  Request run_group(std::vector<P2POp> ops, bool blocking, MemoryKind memory = MemoryKind::host,
                    std::vector<void*> streams = {}, Fault own = Fault::none, std::string own_what = "");
  // Throws the kept failure of a device call, if any (one relaxed load when there is none).
  void throw_async_error() {
    if (!has_async_error.load(std::memory_order_relaxed)) return;
    std::lock_guard lk(async_m);
    std::rethrow_exception(async_error);
  }
  std::exception_ptr get_async_error() {
    std::lock_guard lk(async_m);
    return async_error;
  }
  // Refuses a call on every rank: in issue order, the engine tells every peer (the call
  // fails there, and the communicator can only be destroyed: its links are out of step);
  // throws `what` here. A one-rank communicator stays usable.
  [[noreturn]] void refuse(Fault fault, Collective coll, const std::string& what, bool blocking);
  void shutdown(bool goodbye);
  void abort_now();

 private:
  void execute(const Call& call);
  // A device operation: ordered after the work on `streams` and before the work queued on
  // them later, run by the worker as fn(where `buffers` are now); `wait`: returns once it
  // is over. The links to `peers` (the ranks the call's plan addresses) are made first, on
  // this thread (DeviceCalls, core/stream_order.hpp).
  Request on_streams(const std::vector<void*>& streams, const std::vector<int>& peers,
                     const std::vector<CallStaging::Buffer>& buffers, DeviceCalls::Fn fn, bool wait) {
    return device_calls->submit(queue, engine.get(), streams, peers, buffers, std::move(fn), wait,
                                [this](std::exception_ptr e) { keep_async_error(e); });
  }
  std::vector<int> device_peers(const Call& call);
  void keep_async_error(std::exception_ptr e);
  Comm connect_decided(class ShrinkAgreement& a, net::Fd listener);
  Plan build_plan_for(const Call& call, bool forward) const;
  // The refusal itself, on the thread that runs operations.
  [[noreturn]] void refuse_here(Fault fault, Collective coll, const std::string& what);
  std::string refusal_text(const std::string& what) const;
  // STRATA_CHECK's exchanges: throw on a disagreement (check_pairs: returns the transfers
  // of the pairs that agree, and what the others disagree on).
  void check_collective(const Call& call);
  std::vector<P2POp> check_pairs(const std::vector<P2POp>& ops, Fault own, std::string& disagreement);
};

}  // namespace strata
