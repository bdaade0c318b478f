// The memory half of the Kernels of a device backend (ground/device): tensors in device
// memory, every call queued on the trainer's own stream of the process's backend. Uploads
// go through a few pinned host slots (a copy from pageable memory would either wait for
// the stream, on CUDA, or read the source after the caller reused it, on the emulated
// backend). The kernel half is FunctorKernels (functor_kernels.hpp).
#pragma once

#include <cstddef>
#include <vector>

#include "ground/device/backend.hpp"
#include "kernels.hpp"

namespace strata::train {

class OnDevice : public Kernels {
 public:
  OnDevice(strata::device::Backend& backend, const char* name);
  ~OnDevice() override;
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

  const char* name() const override { return name_; }
  void* alloc(size_t bytes) const override;
  void free(void* p) const override;
  void upload(void* dst, const void* host_src, size_t bytes) const override;
  void download(void* host_dst, const void* src, size_t bytes) const override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void zero(void* dst, size_t bytes) const override;
  void synchronize() const override;
  strata::device::Stream stream() const override { return stream_; }

  strata::device::Backend& backend() const { return backend_; }

 private:
  struct Slot {
    void* pinned = nullptr;
    strata::device::Event copied = nullptr;  // the copy out of it has run
  };
  strata::device::Backend& backend_;
  const char* name_;
  strata::device::Stream stream_;
  mutable std::vector<Slot> slots_;
  mutable size_t next_slot_ = 0;
};

}  // namespace strata::train
