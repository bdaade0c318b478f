// torch.distributed's backend "strata": PyTorch's process-group interface over three
// Strata communicators, made from one unique id: one for collectives and two for
// point-to-point calls, one carrying messages to higher ranks and one to lower ranks.
// A communicator runs its operations in the order they were posted, so a receive that
// waits holds up only the messages behind it in its direction: collectives go on, and a
// pair of ranks exchanging, or a ring, completes whichever they post first (docs/torch.md).
// Every call is issued with the library's *_async form; the returned work completes
// through its request.
//
// torch 1.x: a c10d::ProcessGroup. torch 2.x splits that class into ProcessGroup (the
// front) and Backend (what a plugin implements); the calls this file overrides are the
// same in both, only batch point-to-point (coalescing) changed shape in 2.1.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <strata/strata.hpp>

#include "completer.hpp"
#include "work.hpp"

// torch 2.1 made endCoalescing return the batch's work instead of filling a list.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define STRATA_TORCH_END_COALESCING_RETURNS_WORK 1
#endif

namespace strata_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

class ProcessGroupStrata : public BackendBase {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  // Collective over the group: rank 0 makes a unique id and passes it through `store`
  // (the one torch hands every backend); `timeout` becomes both communicators' timeout.
  // `global_ranks`: the group's members by global rank (empty: the group is the world).
  ProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, std::vector<int64_t> global_ranks = {});
  ~ProcessGroupStrata() override;

  const std::string getBackendName() const override { return "strata"; }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override;
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override;
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override;
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override;
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts) override;

  // batch_isend_irecv: the sends and receives between these two calls are posted together
  // (the library's group_start/group_end on the point-to-point communicators).
  void startCoalescing() override;
#ifdef STRATA_TORCH_END_COALESCING_RETURNS_WORK
  WorkPtr endCoalescing() override;
#else
  void endCoalescing(std::vector<WorkPtr>& works) override;
#endif

 private:
  struct Channel {
    strata::Comm comm;
    Completer completer;
  };
  using Start = std::function<strata::Request(strata::Comm&)>;

  // Issues one operation on `ch` and returns its work. `finish` runs once the request
  // completes (copies into the caller's tensors); `keep` holds buffers the library uses
  // until then.
  c10::intrusive_ptr<StrataWork> launch(Channel& ch, c10d::OpType type, std::vector<at::Tensor> outputs,
                                        const Start& start, std::function<void()> finish = nullptr,
                                        std::vector<at::Tensor> keep = {}, int source = -1);
  // A root argument as a rank of this group (a clear error otherwise).
  int checked_root(int64_t root, const char* call) const;
  void end_batch(const c10::intrusive_ptr<StrataWork>& batch_work);
  void shutdown();

  std::shared_ptr<ErrorContext> context_;
  std::mutex issue_m_;  // calls reach the library one at a time (torch may call from several threads)
  Channel coll_, up_, down_;  // up_: messages to a higher rank (or to self); down_: to a lower one
  Channel& p2p(int from, int to) { return from <= to ? up_ : down_; }
  bool coalescing_ = false;
  std::vector<std::pair<c10::intrusive_ptr<StrataWork>, Channel*>> batch_;
};

}  // namespace strata_torch
