// The emulated backend's execution: streams are threads (stream.hpp), tasks run the
// device layer's functors on the CPU through the memory's backend mappings.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "ground/device/emulated/memory.hpp"
#include "ground/device/emulated/stream.hpp"
#include "ground/device/execution.hpp"

namespace strata::device::emulated {

class EmulatedExecution final : public Execution {
 public:
  EmulatedExecution(EmulatedMemory& memory, unsigned delay_us);
  ~EmulatedExecution() override;

  device::Stream stream_create() override;
  void stream_destroy(device::Stream s) override;
  void stream_synchronize(device::Stream s) override;
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

 private:
  Stream& stream(device::Stream s, const char* call);
  std::shared_ptr<Event> event(device::Event e, const char* call);
  uint64_t* flag_word(const void* flag, const char* call, RegionRef& keep);

  EmulatedMemory& memory_;
  const unsigned delay_us_;
  std::mutex m_;
  std::unordered_map<void*, std::shared_ptr<Stream>> streams_;
  std::unordered_map<void*, std::shared_ptr<Event>> events_;
  std::unique_ptr<Stream> default_stream_;
};

}  // namespace strata::device::emulated
