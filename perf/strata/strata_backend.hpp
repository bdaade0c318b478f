// perf::Backend over a strata::Comm.
#pragma once

#include "backend.hpp"
#include "bootstrap.hpp"

namespace perf {

class StrataBackend : public Backend {
 public:
  explicit StrataBackend(strata::Comm comm);
  ~StrataBackend() override;  // Comm::destroy()

  std::string name() const override { return "strata"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void run(const CollCall& call) override;
  void barrier() override;
  double all_reduce(double v, ScalarOp op) override;
  void abort() noexcept override;

 private:
  strata::Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool aborted_ = false;
};

}  // namespace perf
