// Page-aligned host memory, zeroed (so every page is touched before timing).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace perf {

class Buffer {
 public:
  explicit Buffer(size_t bytes) : size_(bytes) {
    constexpr size_t kAlign = 4096;
    const size_t alloc = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, alloc)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, alloc);
  }
  std::byte* data() { return data_.get(); }
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
