// Element-wise reduction kernels: dst[i] = a[i] (op) b[i]. `dst` may be `a` itself (the
// two-operand form); otherwise the three do not overlap.
#pragma once

#include <cstddef>

#include "strata/types.hpp"

namespace strata {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// avg reduces with sum; finalize() divides by the number of ranks at the end.
ReduceFn reduce_fn(DataType type, ReduceOp op);
// Whether the AVX2/F16C kernels are in use (CPU support, unless STRATA_REDUCE_ISA=generic).
bool use_avx2();

// Applies the op's final step to `count` elements in place (avg: divide by nranks).
void finalize(void* buf, size_t count, DataType type, ReduceOp op, int nranks);
// Whether finalize() does anything for this op (avg).
inline bool has_finalize(ReduceOp op) { return op == ReduceOp::avg; }

}  // namespace strata
