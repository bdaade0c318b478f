// Reduction kernels for any x86-64 (SSE2): what the compiler vectorises, scalar 16-bit.
#define STRATA_ISA generic
#include "ground/reduce_kernels.hpp"

namespace strata::generic {

template <typename Op>
void half_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel<Element<DataType::float16>, Op>(dst, a, b, n);
}
template <typename Op>
void bf16_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel<Element<DataType::bfloat16>, Op>(dst, a, b, n);
}

ReduceFn reduce_fn(DataType type, ReduceOp op) { return table_lookup(type, op); }

}  // namespace strata::generic
