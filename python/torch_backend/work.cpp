#include "work.hpp"

#include <stdexcept>

namespace strata_torch {

std::exception_ptr ErrorContext::translate(const std::exception_ptr& e) const {
  const std::string where = "strata (rank " + std::to_string(rank) + " of " + std::to_string(size) + "): ";
  try {
    std::rethrow_exception(e);
  } catch (const strata::PeerError& p) {
    std::string msg = where + p.what();
    if (!global_ranks.empty() && p.peer() >= 0 && p.peer() < static_cast<int>(global_ranks.size()))
      msg += " (rank " + std::to_string(p.peer()) + " of this group is global rank " +
             std::to_string(global_ranks[p.peer()]) + ")";
    return std::make_exception_ptr(std::runtime_error(msg));
  } catch (const strata::InvalidArgument& a) {
    return std::make_exception_ptr(std::invalid_argument(where + a.what()));
  } catch (const std::exception& x) {
    return std::make_exception_ptr(std::runtime_error(where + x.what()));
  } catch (...) {
    return e;
  }
}

StrataWork::StrataWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<const ErrorContext> context,
                       int source_rank)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      context_(std::move(context)),
      source_rank_(source_rank),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void StrataWork::attach(std::function<void()> finish, std::vector<at::Tensor> keep_alive) {
  std::lock_guard lk(complete_m_);
  finish_ = std::move(finish);
  keep_alive_ = std::move(keep_alive);
}

void StrataWork::issued(strata::Request request) {
  std::lock_guard lk(complete_m_);
  request_ = std::move(request);
  issued_ = true;
}

void StrataWork::complete() {
  std::exception_ptr error;
  {
    std::lock_guard lk(complete_m_);
    if (finishing_) return;  // another thread completes it; wait() waits for the base's completed_
    if (!issued_)
      throw std::logic_error("strata: this point-to-point call is part of a batch that has not ended yet "
                             "(wait on it after batch_isend_irecv returns)");
    try {
      request_.wait();
      if (finish_) finish_();
    } catch (...) {
      error = context_ ? context_->translate(std::current_exception()) : std::current_exception();
    }
    finish_ = nullptr;
    keep_alive_.clear();
    finishing_ = true;
  }
  // Outside complete_m_: the future's callbacks may wait on this work.
  finish(error);  // the base: completed_, exception_, wakes wait()
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

bool StrataWork::isCompleted() {
  std::lock_guard lk(mutex_);
  return completed_;
}

bool StrataWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) complete();
  std::unique_lock lk(mutex_);
  auto done = [&] { return completed_; };
  if (timeout == kNoTimeout)
    cv_.wait(lk, done);  // at once, unless another thread is finishing it
  else if (!cv_.wait_for(lk, timeout, done))
    throw std::runtime_error("strata: Work.wait timed out after " + std::to_string(timeout.count()) +
                             " ms (the operation goes on; the group's timeout ends it if a peer is stuck)");
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int StrataWork::sourceRank() const {
  if (source_rank_ < 0) throw std::logic_error("strata: sourceRank() is only defined for a recv");
  return source_rank_;
}

}  // namespace strata_torch
