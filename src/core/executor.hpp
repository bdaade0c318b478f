// Where a plan's local steps run: copies, reductions and the op's final step, on the memory
// kind of the call. The engine hands its executor every local step of a round and, before
// it posts the round's first transfer, asks it to settle, so the links see what the local
// steps wrote. Host memory runs them inline on the calling thread; a device runs them as
// tasks on its stream, and settling waits for them.
#pragma once

#include <cstddef>
#include <memory>
#include <thread>

#include "ground/memory_kind.hpp"
#include "strata/types.hpp"
#include "transports/transport.hpp"

namespace strata {

class Executor {
 public:
  virtual ~Executor() = default;
  // dst = src, `bytes` of them; the two may overlap.
  virtual void copy(char* dst, const char* src, size_t bytes) = 0;
  // dst = dst op src over `count` elements: how.fn on host memory, how.type and how.op
  // for an executor with kernels of its own.
  virtual void reduce(char* dst, const char* src, size_t count, const Reduction& how) = 0;
  // The op's final step in place (avg: divides by `nranks`).
  virtual void finalize(char* buf, size_t count, DataType type, ReduceOp op, int nranks) = 0;
  // What the local steps wrote so far becomes visible to the links (before transfers are
  // posted) and to the host (at the end of a call): flush() starts it, settled() says
  // whether it is there. The engine polls settled() in its wait, which serves the failure
  // protocol meanwhile, as UCC's executors are tested rather than waited on.
  virtual void flush() = 0;
  virtual bool settled() = 0;
  // Both, blocking: for a caller with nothing else to serve.
  void settle() {
    flush();
    while (!settled()) std::this_thread::yield();
  }
};

// The executor for `kind`: host memory's runs the steps inline; device memory's queues
// them on a stream of its own (InvalidUsage when there is no device backend).
std::unique_ptr<Executor> make_executor(MemoryKind kind);

}  // namespace strata
