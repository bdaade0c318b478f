// Gloo (Debian's libgloo-dev, what PyTorch uses on CPU) behind perf::Backend: its legacy
// algorithm classes, which run well here (the newer gloo::allreduce API stalls for
// seconds with 3+ ranks on this machine). Ranks come from strata-run's environment and
// meet through a FileStore.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <gloo/algorithm.h>
#include <gloo/rendezvous/context.h>

#include "backend.hpp"

namespace perf {

class GlooBackend final : public Backend {
 public:
  GlooBackend();
  std::string name() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool supports(const Coll& c, DataType t, ReduceOp op) const override;
  void run(const CollCall& call) override;
  void barrier() override;
  double all_reduce(double v, ScalarOp op) override;

 private:
  // Gloo algorithm objects bind their buffers at construction and set up pairs, so they
  // are made once per (collective, buffer, count, type, op, root) and reused.
  gloo::Algorithm& algorithm(const CollCall& c);

  int rank_ = 0, size_ = 1;
  std::string algo_;  // GLOO_PERF_ALGO for all_reduce: ring_chunked (default), ring, halving_doubling
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::map<std::tuple<Coll, const void*, void*, size_t, int, int, int>, std::unique_ptr<gloo::Algorithm>> cache_;
};

}  // namespace perf
