// perf::Backend over the nccl* functions of whichever libnccl.so.2 the dynamic linker finds
// at run time (dlopen): Strata's by default (build/lib/nccl is on strata-perf's run path),
// NVIDIA's when its directory comes first on LD_LIBRARY_PATH. The ranks find each other
// with a Strata communicator, which passes rank 0's ncclUniqueId and carries the
// benchmark's own barriers and timing reductions; only the timed calls go through nccl*.
// Buffers are the benchmark's host memory: Strata's library takes them; NVIDIA's needs
// device buffers, which strata-perf gains with Strata's device layer (docs/nccl.md).
#pragma once

#include <memory>
#include <string>

#include "backend.hpp"
#include "bootstrap.hpp"
#include "strata_backend.hpp"

struct ncclComm;  // nccl/nccl.h's, which only the .cpp includes

namespace perf {

class NcclBackend : public Backend {
 public:
  // Throws std::runtime_error when libnccl.so.2 cannot be loaded or a communicator made.
  explicit NcclBackend(strata::Comm control);
  ~NcclBackend() override;  // ncclCommDestroy, then the control communicator's

  std::string name() const override { return "nccl"; }
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  void run(const CollCall& call) override;
  void barrier() override { control_.barrier(); }
  double all_reduce(double v, ScalarOp op) override { return control_.all_reduce(v, op); }
  void abort() noexcept override;

  struct Api;  // the library's functions

 private:
  std::unique_ptr<Api> api_;
  StrataBackend control_;
  ::ncclComm* comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace perf
