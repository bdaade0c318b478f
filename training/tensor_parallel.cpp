#include "tensor_parallel.hpp"

namespace strata::train {

const float* TensorParallel::gather(const float* mine, float* all, int N, int C) {
  if (!sp_) return mine;
  const size_t n = static_cast<size_t>(rows(N)) * C;
  clock_.comm([&] { group_.all_gather(mine, all, n).wait(); });
  return all;
}

void TensorParallel::reduce(const float* partial, float* mine, int N, int C) {
  if (sp_) {
    const size_t n = static_cast<size_t>(rows(N)) * C;
    clock_.comm([&] { group_.reduce_scatter(partial, mine, n, strata::ReduceOp::sum).wait(); });
  } else {
    const size_t n = static_cast<size_t>(N) * C;
    clock_.comm([&] { group_.all_reduce(partial, mine, n, strata::ReduceOp::sum).wait(); });
  }
}

void TensorParallel::all_reduce(float* x, size_t n, strata::ReduceOp op) {
  if (size() == 1) return;
  clock_.comm([&] { group_.all_reduce(x, x, n, op).wait(); });
}

}  // namespace strata::train
