// An array of T in one device's memory (Kernels::alloc: host memory on the host, device
// memory on a device backend), zeroed when made and freed with it. Host code must not
// touch the elements of a device's buffer: it moves them with Kernels::upload/download.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels.hpp"

namespace strata::train {

template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Kernels& k, size_t n) : k_(&k), p_(static_cast<T*>(k.alloc(n * sizeof(T)))), n_(n) {}
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept : k_(o.k_), p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      k_ = o.k_;
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  // All of it, or [from, from + n), to the host.
  std::vector<T> to_host() const { return to_host(0, n_); }
  std::vector<T> to_host(size_t from, size_t n) const {
    std::vector<T> out(n);
    if (n) k_->download(out.data(), p_ + from, n * sizeof(T));
    return out;
  }

 private:
  void release() {
    if (p_) k_->free(p_);
    p_ = nullptr;
  }
  const Kernels* k_ = nullptr;
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace strata::train
