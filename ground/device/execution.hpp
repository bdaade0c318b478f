// The device backend's execution: streams, events and the tasks that run on them (UCC's
// execution component). Every task is stream-ordered: it runs after the tasks queued on
// its stream before it, and the call returns before it runs. A task's pointers may be
// device memory of this process, imported peer memory, or pinned or plain host memory;
// a range that runs past the end of a device allocation is InvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "strata/device.hpp"
#include "strata/types.hpp"

namespace strata::device {

// The backend's native event (cudaEvent_t on CUDA).
using Event = void*;

// reduce() takes at most this many sources (a kernel argument holds their addresses).
inline constexpr int kMaxReduceSources = 32;

// How a made stream relates to the default stream (nullptr, CUDA's legacy default
// stream), as CUDA's stream flags say: a `blocking` stream (cudaStreamDefault) waits for
// the work queued on the default stream before it, and the default stream waits for the
// work queued on every blocking stream before its own; a `non_blocking` one
// (cudaStreamNonBlocking, what Strata and PyTorch make) does neither.
enum class StreamFlags : uint8_t { non_blocking, blocking };

class Execution {
 public:
  virtual ~Execution() = default;

  // nullptr is the default stream. Made streams do not synchronise with it unless made
  // `blocking`.
  virtual Stream stream_create(StreamFlags flags = StreamFlags::non_blocking) = 0;
  virtual void stream_destroy(Stream s) = 0;  // waits for the work queued on it
  virtual void stream_synchronize(Stream s) = 0;
  // Whether work queued on `s` is being captured into a CUDA graph (cudaStreamIsCapturing;
  // the emulated backend answers what ProgramCalls::begin_capture set). A device call
  // cannot be captured: its worker raises a flag from the host.
  virtual bool stream_capturing(Stream s) = 0;

  // An event marks a point of a stream: record() sets it to the work queued so far,
  // query() says whether that work has finished, stream_wait() makes a stream's later
  // tasks wait for it (for the last record() made before the call, as CUDA does). An
  // event never recorded counts as finished.
  virtual Event event_create() = 0;
  virtual void event_destroy(Event e) = 0;
  virtual void event_record(Event e, Stream s) = 0;
  virtual bool event_query(Event e) = 0;
  virtual void event_synchronize(Event e) = 0;
  virtual void stream_wait(Stream s, Event e) = 0;

  virtual void copy(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual void memset(void* dst, int value, size_t bytes, Stream s) = 0;
  // dst = srcs[0] op srcs[1] op ... op srcs[nsrc-1], element-wise, in that order; dst may
  // be srcs[0] (no other overlap). 8- and 16-bit floats accumulate in fp32 and round
  // once; integers wrap. avg sums (finalize divides). 1 <= nsrc <= kMaxReduceSources.
  virtual void reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
                      Stream s) = 0;
  // The op's last step in place: avg divides by nranks; other ops do nothing.
  virtual void finalize(void* dst, size_t count, DataType type, ReduceOp op, int nranks, Stream s) = 0;
  // fn(arg) on a backend thread when the stream gets there; fn must not call the backend.
  virtual void host_callback(Stream s, void (*fn)(void*), void* arg) = 0;
  // Host code as a stream task over device memory, for a backend whose device memory is
  // host memory reached through another address (the emulated backend; its device
  // kernels are CPU code, such as the trainer's): when the stream gets there,
  // fn(views) runs on a backend thread, views[i] being where the task reaches ptrs[i]
  // (a pointer anywhere inside a device allocation; host memory and nullptr are passed
  // as they are), and the allocations stay mapped while it runs. fn must not call the
  // backend. A backend whose device memory belongs to a GPU refuses it (InvalidUsage):
  // its kernels are GPU code.
  using HostTask = std::function<void(void* const* views)>;
  virtual void host_task(Stream s, const void* const* ptrs, int n, HostTask fn) = 0;

  // Stream memory operations (NCCL-style ordering between streams and processes): the
  // stream stores v into *flag once its earlier tasks are done (their writes visible
  // first), or waits until *flag >= v before its later tasks. `flag` is 8-byte aligned,
  // in pinned host memory (Memory::host_alloc, possibly a peer's, imported) or device
  // memory. A wait whose flag never comes blocks its stream for good, as on a GPU.
  virtual void write_value(Stream s, uint64_t* flag, uint64_t v) = 0;
  virtual void wait_value(Stream s, const uint64_t* flag, uint64_t v) = 0;
};

}  // namespace strata::device
