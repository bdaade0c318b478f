// Reduction kernels for any x86-64 (SSE2): what the compiler vectorises, scalar 16-bit.
#define STRATA_ISA generic
#include "ground/reduce_kernels.hpp"

namespace strata::generic {

template <typename Op>
void half_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel16_scalar<half_to_float, float_to_half, Op>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                               static_cast<const uint16_t*>(b), n);
}
template <typename Op>
void bf16_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel16_scalar<bf16_to_float, float_to_bf16, Op>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                               static_cast<const uint16_t*>(b), n);
}

ReduceFn reduce_fn(DataType type, ReduceOp op) { return table_lookup(type, op); }

}  // namespace strata::generic
