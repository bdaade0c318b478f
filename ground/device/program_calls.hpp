// What a CUDA program does on its own, beside Strata's calls: PyTorch's caching allocator
// (cudaMalloc segments that hold many tensors), its pinned memory (cudaHostAlloc), its own
// kernels (whose modules load on first launch), CUDA graph capture. Strata never makes
// these calls. The tests and the replay of PyTorch's NCCL calls (tests/nccl/replay) make
// them through the backend under test, so the same program runs on a GPU (the CUDA
// runtime's own calls) and in CI, where the emulated backend blocks as CUDA does
// (docs/device.md, "Blocking rules").
#pragma once

#include <cstddef>

#include "ground/device/execution.hpp"

namespace strata::device {

class ProgramCalls {
 public:
  virtual ~ProgramCalls() = default;

  // cudaMalloc / cudaFree: device memory Strata did not allocate (Memory::query says
  // Origin::foreign), shared with other processes through CUDA's legacy IPC handles;
  // programs hand out pointers inside it. cudaFree waits for the device.
  virtual void* device_malloc(size_t bytes) = 0;
  virtual void device_free(void* p) = 0;
  // cudaHostAlloc / cudaFreeHost: pinned host memory, the program's own.
  virtual void* host_malloc(size_t bytes) = 0;
  virtual void host_free(void* p) = 0;
  // A kernel of the program's own copying `bytes` (a multiple of 4) on `s`, as PyTorch's
  // at::cat does; under CUDA's lazy loading its first launch loads its module.
  virtual void kernel_copy(void* dst, const void* src, size_t bytes, Stream s) = 0;
  // cudaStreamBeginCapture (thread-local mode) / cudaStreamEndCapture (the graph is dropped).
  virtual void begin_capture(Stream s) = 0;
  virtual void end_capture(Stream s) = 0;
};

}  // namespace strata::device
