// Device buffers a program allocated itself (PyTorch's cudaMalloc segments: Origin::foreign)
// staged through the communicator's own device memory for the length of a device call.
//
// Why: peers read a call's buffers in place (the ipc link maps the sender's allocation), and
// memory Strata did not allocate can only be shared through CUDA's legacy IPC calls
// (cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcCloseMemHandle) and asked about with
// cuPointerGetAttributes: driver calls that may need the context lock, which the user's
// thread keeps while it blocks on the very stream the call holds (a copy to pageable memory,
// cudaHostAlloc). Made on the worker, they hang the GPU (docs/device.md, "Blocking rules";
// the replay of PyTorch's calls, tests/nccl/replay, found it). So the buffers are looked up
// on the caller's thread, before the stream is held, and a foreign one is copied into
// Strata's own memory (exported with cuMem fds, which need no such lock) when the call
// starts and back out when it ends. The cost: a device-to-device copy of each foreign
// buffer's bytes each way, on a stream of the communicator's, before and after the call.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ground/device/backend.hpp"

namespace strata {

class ForeignStaging {
 public:
  explicit ForeignStaging(device::Backend& backend) : backend_(backend) {}
  ~ForeignStaging();
  ForeignStaging(const ForeignStaging&) = delete;
  ForeignStaging& operator=(const ForeignStaging&) = delete;

  // A buffer of a call: `read` its bytes are the call's input, `written` its output.
  struct Buffer {
    const void* ptr;
    size_t bytes;
    bool read, written;
  };
  // What one call stages: where each buffer asked about is now (the same pointer unless it
  // was foreign), and the copies in and out.
  struct Plan {
    std::vector<void*> moved;  // one per Buffer, in order
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
    };
    std::vector<Copy> in, out;
    bool empty() const { return in.empty() && out.empty(); }
  };

  // On the caller's thread, before the call's streams are held: looks the buffers up, and
  // places the foreign ones in the staging block (grown as needed; buffers that overlap
  // stay as they lie to one another, so in-place forms stay in place), making the stream
  // and event the worker copies with. A block outgrown stays until the communicator goes:
  // a call issued before may still use it.
  Plan prepare(const std::vector<Buffer>& buffers);
  // On the worker, inside the call: the copies of `plan`, done when they return.
  void copy_in(const Plan& plan) { run(plan.in); }
  void copy_out(const Plan& plan) { run(plan.out); }

 private:
  void run(const std::vector<Plan::Copy>& copies);
  void* block(size_t bytes);

  device::Backend& backend_;
  device::Stream stream_ = nullptr;
  device::Event done_ = nullptr;
  void* block_ = nullptr;
  size_t block_bytes_ = 0;
  std::vector<void*> retired_;
};

}  // namespace strata
