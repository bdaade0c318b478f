// One operation as torch sees it (c10d::Work): the library's Request, then `finish`, which
// copies results into the caller's tensors. Whoever comes first completes it: the caller's
// wait(), or the group's Completer, which completes works in issue order so that their
// futures complete even when nobody waits on the work (DDP waits on the future).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <strata/strata.hpp>

namespace strata_torch {

// Turns the library's errors into messages that say which group and rank saw them, and
// the failing peer's global rank where the group is a sub-group.
struct ErrorContext {
  int rank = 0, size = 1;
  std::vector<int64_t> global_ranks;  // empty: the group is the world
  std::exception_ptr translate(const std::exception_ptr& e) const;
};

class StrataWork : public c10d::Work {
 public:
  StrataWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<const ErrorContext> context,
             int source_rank = -1);
  // What runs once the operation is done, and the buffers it uses until then.
  void attach(std::function<void()> finish, std::vector<at::Tensor> keep_alive);
  // The operation's request. Works of a batch of point-to-point calls receive their
  // batch's request when the batch ends (ProcessGroupStrata::endCoalescing).
  void issued(strata::Request request);
  // Waits for the request, runs `finish`, marks the work and its future; once.
  void complete();

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override {}
  std::vector<at::Tensor> result() override { return outputs_; }
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<const ErrorContext> context_;
  const int source_rank_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;

  std::mutex complete_m_;  // held while waiting for the request (not the base's mutex_, which isCompleted takes)
  bool issued_ = false;
  bool finishing_ = false;  // a thread has waited for the request and is marking the work
  strata::Request request_;
  std::function<void()> finish_;
  std::vector<at::Tensor> keep_alive_;  // buffers the library reads or writes until the request completes
};

}  // namespace strata_torch
