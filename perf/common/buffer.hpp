// Page-aligned host memory, zeroed (so every page is touched before timing): the default
// BenchBuffer, where the calls and the checks use the same memory.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace perf {

// A benchmark buffer: where the library's calls point (host memory, or device memory) and
// the host memory the loop fills and checks, with copies between the two where they differ.
class BenchBuffer {
 public:
  virtual ~BenchBuffer() = default;
  virtual std::byte* call_data() = 0;
  virtual std::byte* host_data() = 0;
  // The first `bytes` from host_data() to call_data(), or back; nothing where they are the
  // same memory. Both return once the copy is done.
  virtual void to_call(size_t /*bytes*/) {}
  virtual void to_host(size_t /*bytes*/) {}
};

class Buffer final : public BenchBuffer {
 public:
  explicit Buffer(size_t bytes) : size_(bytes) {
    constexpr size_t kAlign = 4096;
    const size_t alloc = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, alloc)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, alloc);
  }
  std::byte* data() { return data_.get(); }
  std::byte* call_data() override { return data(); }
  std::byte* host_data() override { return data(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_;
};

}  // namespace perf
