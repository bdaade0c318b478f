// What the device tests share: the backend under test (the process's, chosen by
// STRATA_DEVICE: the same binary runs on the emulated and the CUDA backend) and moving
// bytes in and out of device memory through it.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "ground/device/backend.hpp"

namespace strata_test {

using strata::device::Backend;

// The process's backend (main() refuses to run the tests without one).
Backend& dev();
// Checks that only the emulated backend can make (death tests, delay mode).
bool on_emulated();

// Device memory freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes), p_(dev().memory().alloc(bytes)) {}
  ~DeviceBuffer() { dev().memory().free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  char* bytes() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  void* p_;
};

// Pinned host memory freed at scope exit: what a copy on a stream that is held back needs
// on CUDA (a copy from or to pageable memory waits for its stream).
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t count, T fill = T())
      : count_(count), p_(static_cast<T*>(dev().memory().host_alloc(count * sizeof(T)))) {
    for (size_t i = 0; i < count; ++i) p_[i] = fill;
  }
  ~PinnedBuffer() { dev().memory().host_free(p_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* data() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }
  size_t size() const { return count_; }
  std::vector<T> vector() const { return std::vector<T>(p_, p_ + count_); }

 private:
  size_t count_;
  T* p_;
};

// Synchronous copies through a stream (nullptr: the default stream).
inline void upload(void* dst, const void* src, size_t bytes, strata::device::Stream s = nullptr) {
  dev().execution().copy(dst, src, bytes, s);
  dev().execution().stream_synchronize(s);
}
template <typename T>
std::vector<T> download(const void* src, size_t count, strata::device::Stream s = nullptr) {
  std::vector<T> out(count);
  dev().execution().copy(out.data(), src, count * sizeof(T), s);
  dev().execution().stream_synchronize(s);
  return out;
}

}  // namespace strata_test
