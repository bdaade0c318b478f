// perf::Backend over a strata::Comm, on host buffers or (--device cuda|emulated) on device
// buffers from strata::alloc, each call then on a stream of its own and timed to the end
// of a synchronisation of that stream.
#pragma once

#include "backend.hpp"
#include "bootstrap.hpp"
#include "strata/device.hpp"

namespace perf {

class StrataBackend : public Backend {
 public:
  // `device`: the buffers are device memory of the process's device backend (STRATA_DEVICE).
  // `shared`: host buffers from strata::alloc(host), which peers read in place.
  StrataBackend(strata::Comm comm, bool device = false, bool shared = false);
  ~StrataBackend() override;  // Comm::destroy()

  std::string name() const override { return "strata"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void run(const CollCall& call) override;
  void barrier() override;
  double all_reduce(double v, ScalarOp op) override;
  void abort() noexcept override;
  std::unique_ptr<BenchBuffer> make_buffer(size_t bytes) override;
  std::string device_text() const override;

 private:
  // A device call's end: its stream synchronised, then its Request (which throws its error).
  void finish(strata::Request r);

  strata::Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool aborted_ = false;
  bool device_ = false;
  bool shared_ = false;
  strata::device::Stream stream_ = nullptr;
};

}  // namespace perf
