// ProcessGroupNCCL's way of calling NCCL (PyTorch 2.11: ProcessGroupNCCL.cpp, NCCLUtils.cpp,
// CUDAStream.cpp; /work/shared/research/pytorch-nccl-pattern.md has the line numbers), with
// the same threads, streams and events, on the device backend under test (the CUDA runtime
// on a GPU, the emulated backend in CI):
// - the communicator is made by the first collective (lazy: rank 0's unique id through a
//   file, as through the store; a blocking ncclCommInitRankConfig), or when the group is
//   made (eager, as with device_id), or non-blocking (polled with ncclCommGetAsyncError);
// - the first use of a pool stream makes 4 x 32 non-blocking streams; the collectives run
//   on one of them;
// - a collective: cudaStreamIsCapturing on the current stream, an event recorded there and
//   waited for by the pool stream, the NCCL call on the pool stream, small copies after it,
//   an end event (made lazily, at its first record, while the call holds the pool stream)
//   recorded on the pool stream and queued for the watchdog, and Work::wait: the current
//   stream waits for the end event (with blocking wait: the host polls it every 1 ms);
// - a watchdog thread, every 100 ms under the mutex the main thread needs to queue its next
//   work: ncclCommGetAsyncError and cudaEventQuery(end) of each pending work; a heartbeat
//   thread that makes no CUDA call.
// The current stream is the default (legacy) stream, as in DDP's constructor.
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ground/device/backend.hpp"

namespace replay {

using strata::device::Event;
using strata::device::Stream;

enum class Init { lazy, eager, nonblocking };

struct GroupOptions {
  Init init = Init::lazy;
  bool watchdog = true;  // false: TORCH_NCCL_BLOCKING_WAIT=1 (no watchdog; wait() polls the end event)
};

class ProcessGroup {
 public:
  ProcessGroup(strata::device::Backend& gpu, const char* id_file, GroupOptions o);
  ~ProcessGroup();  // stops the threads, destroys the communicator

  // The NCCL call of a collective, given the communicator and the pool stream.
  using NcclCall = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;
  // ProcessGroupNCCL::collective() with asyncOp, then Work::wait(). `after`: PyTorch's
  // copies on the pool stream after the call (before the end event).
  void collective(const char* name, const NcclCall& call, const std::function<void(Stream)>& after = {});
  // A collective with async_op=False: the call on the current stream itself, no events.
  void on_current_stream(const char* name, const NcclCall& call);
  // What the watchdog or the calls met (empty: nothing).
  std::string failure() const;

 private:
  ncclComm_t comm();  // made now if it is not yet (lazy), ready (non-blocking)
  void make_comm();
  Stream pool_stream();
  void check(ncclResult_t r, const char* what);
  void watchdog_loop();
  void heartbeat_loop();

  strata::device::Backend& gpu_;
  const std::string id_file_;
  const GroupOptions o_;
  ncclComm_t comm_ = nullptr;
  std::mutex comm_m_;  // NCCLComm's mutex: ncclCommGetAsyncError under it
  std::vector<Stream> pool_;
  Event nccl_event_ = nullptr;  // ncclEvents_[key]: the pool stream waits for the current one
  std::mutex cache_m_;
  std::vector<Event> event_cache_;  // the CUDA event cache: end events of completed works
  std::mutex work_m_;               // workMetaListMutex_
  std::deque<Event> works_;         // pending works' end events
  mutable std::mutex failure_m_;
  std::string failure_;
  std::atomic<bool> stop_{false};
  std::mutex stop_m_;
  std::condition_variable stop_cv_;
  std::thread watchdog_, heartbeat_;
};

}  // namespace replay
