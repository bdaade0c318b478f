// A device call's buffers staged through the communicator's own device memory for the
// length of the call, where the call cannot use them as they are:
//
// - Device memory a program allocated itself (PyTorch's cudaMalloc segments:
//   Origin::foreign). Peers read a call's buffers in place (the ipc link maps the sender's
//   allocation), and such memory can only be shared through CUDA's legacy IPC calls
//   (cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcCloseMemHandle) and asked about with
//   cuPointerGetAttributes: driver calls that may need the context lock, which the user's
//   thread keeps while it blocks on the very stream the call holds (a copy to pageable
//   memory, cudaHostAlloc). Made on the worker, they hang the GPU (docs/device.md, "Blocking
//   rules"; the replay of PyTorch's calls, tests/nccl/replay, found it). So the buffers are
//   looked up on the caller's thread, before the stream is held, and a foreign one is copied
//   into Strata's own memory (exported with cuMem fds, which need no such lock) when the
//   call starts and back out when it ends.
// - A pre-multiplied sum's input (Call::premul): copied in multiplied by its factor, with
//   the prod reduction's arithmetic (a reduce task against a block of copies of the factor,
//   as strata::scale does on the host), so the call sums the scaled copy and the input
//   stays as it was.
//
// Buffers that overlap a staged one are staged with it, keeping their places relative to
// one another (in-place forms stay in place). The copies run on a stream of the
// communicator's, on the worker, inside the call. Cost: a device copy of each staged
// buffer's bytes each way.
#pragma once

#include <cstddef>
#include <vector>

#include "ground/call.hpp"
#include "ground/device/backend.hpp"

namespace strata {

class CallStaging {
 public:
  explicit CallStaging(device::Backend& backend) : backend_(backend) {}
  ~CallStaging();
  CallStaging(const CallStaging&) = delete;
  CallStaging& operator=(const CallStaging&) = delete;

  // A buffer of a call: `read` its bytes are the call's input, `written` its output.
  // `scale`: the input is the buffer's elements (of `type`) times this factor.
  struct Buffer {
    const void* ptr;
    size_t bytes;
    bool read, written;
    const Call::PreMul* scale = nullptr;
    DataType type = DataType::uint8;
  };
  // What one call stages: where each buffer asked about is now (the same pointer unless it
  // was staged), and the copies in and out.
  struct Plan {
    std::vector<void*> moved;  // one per Buffer, in order
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
      bool scaled = false;  // dst = src * factor, elements of `type`
      DataType type = DataType::uint8;
      Call::PreMul factor;
    };
    std::vector<Copy> in, out;
  };

  // On the caller's thread, before the call's streams are held: looks the buffers up and
  // places the ones to stage in the staging block (grown as needed), making what the
  // worker copies with (a stream, an event, the factors' memory). A block outgrown stays
  // until the communicator goes: a call issued before may still use it.
  Plan prepare(const std::vector<Buffer>& buffers);
  // On the worker, inside the call: the copies of `plan`, done when they return.
  void copy_in(const Plan& plan) { run(plan.in); }
  void copy_out(const Plan& plan) { run(plan.out); }

 private:
  void run(const std::vector<Plan::Copy>& copies);
  void scale(const Plan::Copy& c);
  char* grow(char*& block, size_t& have, size_t bytes);

  device::Backend& backend_;
  device::Stream stream_ = nullptr;
  device::Event done_ = nullptr;
  char* block_ = nullptr;
  size_t block_bytes_ = 0;
  char* factors_ = nullptr;       // device memory: copies of a pre-multiplied sum's factor
  unsigned char* factor_ = nullptr;  // pinned: a factor from host memory, on its way there
  std::vector<void*> retired_;
};

}  // namespace strata
