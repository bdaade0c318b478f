#include "core/executor.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "ground/device/backend.hpp"
#include "ground/reduce.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

// Host memory: the local steps run on the calling thread, so their results are visible to
// the links as soon as they return.
class HostExecutor final : public Executor {
 public:
  void copy(char* dst, const char* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void reduce(char* dst, const char* src, size_t count, const Reduction& how) override { how.fn(dst, dst, src, count); }
  void finalize(char* buf, size_t count, DataType type, ReduceOp op, int nranks) override {
    strata::finalize(buf, count, type, op, nranks);
  }
  void flush() override {}
  bool settled() override { return true; }
};

// Device memory: the local steps are tasks on the engine's own stream, which starts after
// the call's stream reached the call (the worker saw its start flag). flush() records an
// event behind them and settled() asks whether it has passed, so the links' transfers, driven from the host, and the
// done flag that releases the user's stream come after what they wrote.
class DeviceExecutor final : public Executor {
 public:
  explicit DeviceExecutor(device::Backend& b)
      : x_(b.execution()), stream_(x_.stream_create()), done_(x_.event_create()) {}
  ~DeviceExecutor() override {
    try {
      x_.event_destroy(done_);
      x_.stream_destroy(stream_);  // waits for what is queued
    } catch (...) {
      // The backend failing at exit has no one left to tell.
    }
  }

  void copy(char* dst, const char* src, size_t bytes) override {
    // Plans may copy between overlapping ranges (as memmove); a device copy may not, so the
    // copy goes in pieces no longer than the distance, each clear of those still to read.
    const size_t gap = dst > src ? static_cast<size_t>(dst - src) : static_cast<size_t>(src - dst);
    if (gap >= bytes) {
      x_.copy(dst, src, bytes, stream_);
      return;
    }
    if (dst < src) {
      for (size_t at = 0; at < bytes; at += gap) x_.copy(dst + at, src + at, std::min(gap, bytes - at), stream_);
    } else {
      for (size_t end = bytes; end > 0;) {
        const size_t n = std::min(gap, end);
        end -= n;
        x_.copy(dst + end, src + end, n, stream_);
      }
    }
  }
  void reduce(char* dst, const char* src, size_t count, const Reduction& how) override {
    const void* srcs[2] = {dst, src};
    x_.reduce(dst, srcs, 2, count, how.type, how.op, stream_);
  }
  void finalize(char* buf, size_t count, DataType type, ReduceOp op, int nranks) override {
    x_.finalize(buf, count, type, op, nranks, stream_);
  }
  void flush() override { x_.event_record(done_, stream_); }
  bool settled() override { return x_.event_query(done_); }

 private:
  device::Execution& x_;
  device::Stream stream_;
  device::Event done_;
};

}  // namespace

std::unique_ptr<Executor> make_executor(MemoryKind kind) {
  if (kind == MemoryKind::host) return std::make_unique<HostExecutor>();
  return std::make_unique<DeviceExecutor>(device::require_backend("a call on device memory"));
}

}  // namespace strata
