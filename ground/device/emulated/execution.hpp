// The emulated backend's execution: streams are threads (stream.hpp), tasks run the
// device layer's functors on the CPU through the memory's backend mappings.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ground/device/emulated/context_lock.hpp"
#include "ground/device/emulated/memory.hpp"
#include "ground/device/emulated/stream.hpp"
#include "ground/device/execution.hpp"

namespace strata::device::emulated {

class EmulatedExecution final : public Execution {
 public:
  EmulatedExecution(EmulatedMemory& memory, ContextLock& lock, unsigned delay_us);
  ~EmulatedExecution() override;

  device::Stream stream_create(StreamFlags flags = StreamFlags::non_blocking) override;
  void stream_destroy(device::Stream s) override;
  void stream_synchronize(device::Stream s) override;
  bool stream_capturing(device::Stream s) override;
  device::Event event_create() override;
  void event_destroy(device::Event e) override;
  void event_record(device::Event e, device::Stream s) override;
  bool event_query(device::Event e) override;
  void event_synchronize(device::Event e) override;
  void stream_wait(device::Stream s, device::Event e) override;
  void copy(void* dst, const void* src, size_t bytes, device::Stream s) override;
  void memset(void* dst, int value, size_t bytes, device::Stream s) override;
  void reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
              device::Stream s) override;
  void finalize(void* dst, size_t count, DataType type, ReduceOp op, int nranks, device::Stream s) override;
  void host_callback(device::Stream s, void (*fn)(void*), void* arg) override;
  void host_task(device::Stream s, const void* const* ptrs, int n, HostTask fn) override;
  void write_value(device::Stream s, uint64_t* flag, uint64_t v) override;
  void wait_value(device::Stream s, const uint64_t* flag, uint64_t v) override;
  // Every stream's queued work has run (cuCtxSynchronize).
  void synchronize_all();
  // What ProgramCalls::begin_capture / end_capture set, and stream_capturing answers.
  void set_capturing(device::Stream s, bool capturing);

 private:
  struct Made {
    std::shared_ptr<Stream> stream;
    bool blocking;  // synchronises with the default stream (StreamFlags::blocking)
  };
  Stream& stream(device::Stream s, const char* call);
  // Queues `task` on `s` after what the default stream's implicit synchronisation makes
  // it wait for (a blocking stream: the default stream's earlier work; the default
  // stream: every blocking stream's). Returns the stream and the task's ticket.
  std::pair<Stream*, uint64_t> enqueue(device::Stream s, const char* call, std::function<void()> task);
  std::shared_ptr<Event> event(device::Event e, const char* call);
  uint64_t* flag_word(const void* flag, const char* call, RegionRef& keep);

  EmulatedMemory& memory_;
  ContextLock& lock_;
  const unsigned delay_us_;
  std::mutex m_;
  std::unordered_map<void*, Made> streams_;
  std::unordered_map<void*, std::shared_ptr<Event>> events_;
  std::unordered_set<void*> capturing_;
  size_t blocking_streams_ = 0;
  std::unique_ptr<Stream> default_stream_;
};

}  // namespace strata::device::emulated
