// How a communicator's device calls are ordered with its users' streams, NCCL's semantics:
// a call runs after the work already queued on its stream, and work queued on the stream
// after it waits for it; the call itself returns at once.
//
// At call time the user's stream gets two tasks: write_value(start, seq) and then
// wait_value(done, seq). The communicator's worker, which runs its operations in issue
// order, waits on the host until `start` reaches seq (the stream got there, so what the
// stream wrote before is visible), runs the call, and stores done = seq, which releases
// the stream. Each stream has its own start flag (streams reach their calls in any order,
// and a flag only grows within one stream); `done` is one flag for the communicator, since
// the worker finishes calls in issue order. A call that fails stores done as well: a user's
// stream never hangs on a dead peer.
//
// The flags are pinned host memory (Memory::host_alloc) that is never freed: a stream may
// still reach a queued write or wait after its communicator is gone.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/call_staging.hpp"
#include "core/op_queue.hpp"
#include "ground/device/backend.hpp"
#include "strata/strata.hpp"

namespace strata {

class Engine;

class StreamOrder {
 public:
  // `rank`: this rank, named when its own stream never reaches a call.
  StreamOrder(device::Backend& backend, int rank);
  // Releases every stream still waiting on this communicator (release_all).
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // What the worker needs of one call: its number and the start flag of each of its streams.
  struct Ticket {
    uint64_t seq = 0;
    std::vector<const uint64_t*> started;
    // Queuing on a stream failed (not a stream of this backend): the call must not run, and
    // its number must still be completed in order, as streams queued before may wait on it.
    std::exception_ptr error;
  };
  // Queues start and done on each of `streams` (distinct; nullptr is the default stream)
  // for the next call. The caller hands the tickets to the worker in the order issued.
  Ticket issue(const std::vector<device::Stream>& streams);

  // On the worker: returns once every stream of `t` has reached its call. Throws a
  // TimeoutError naming this rank after `timeout_s` (a stream whose earlier work never
  // ends), or what `cancelled()` returns when it returns one (an aborted communicator).
  void wait_started(const Ticket& t, double timeout_s, const std::function<std::exception_ptr()>& cancelled) const;
  // The call `seq` is over (done or failed): its streams go on.
  void complete(uint64_t seq);
  // Every call issued so far is over, run or not (abort, destroy): no stream stays held.
  void release_all();

 private:
  const uint64_t* start_flag(device::Stream s);

  device::Backend& backend_;
  const int rank_;
  std::mutex m_;  // issue() may be called from any thread
  std::unordered_map<device::Stream, uint64_t*> start_;
  uint64_t* done_;
  uint64_t issued_ = 0;
};

// A communicator's device calls, whole: comm.cpp hands each one here once.
// On the caller's thread, under one lock (calls take their numbers in the order the worker
// runs them): a stream being captured into a CUDA graph is refused; what the worker would
// create is made before the stream is held (a GPU driver call that creates can wait on the
// user's thread, blocked on that stream): the executor, the device links to the call's
// peers (the worker makes none: Connector::allow_device), the driver's view of the
// buffers (foreign ones and a pre-multiplied sum's input staged, core/call_staging.hpp);
// then the call's place on its streams, and the operation on the worker's queue.
// On the worker: the wait for the streams (answering peers' probes meanwhile), the call on
// the staged buffers, and its number completed whatever happens: no stream stays held.
class DeviceCalls {
 public:
  DeviceCalls(int rank, double timeout_s) : rank_(rank), timeout_s_(timeout_s) {}
  using Fn = std::function<void(const std::vector<void*>&)>;  // given where `buffers` are now
  using KeepError = std::function<void(std::exception_ptr)>;  // a failure, for later calls
  // Runs `fn` on `queue`'s worker, ordered on `streams`; `wait`: returns once it is over.
  // `engine` is the communicator's (null: one rank, no peers).
  Request submit(OpQueue& queue, Engine* engine, const std::vector<void*>& streams, const std::vector<int>& peers,
                 const std::vector<CallStaging::Buffer>& buffers, Fn fn, bool wait, KeepError keep_error);
  // Every call issued so far is over, run or not (abort, destroy).
  void release_all() {
    if (order_) order_->release_all();
  }

 private:
  void run(Engine& engine, const StreamOrder::Ticket& t, const std::function<void()>& fn, const KeepError& keep_error);

  const int rank_;
  const double timeout_s_;
  std::mutex issue_m_;
  std::unique_ptr<StreamOrder> order_;    // made at the first call
  std::unique_ptr<CallStaging> staging_;  // made at the first call
};

}  // namespace strata
