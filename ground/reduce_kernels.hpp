// The reduction kernels, compiled once per instruction set: this header is included by
// reduce_generic.cpp (any x86-64) and reduce_avx2.cpp (-mavx2 -mf16c), and reduce.cpp picks
// the table the CPU supports at run time, so one binary runs everywhere. The arithmetic
// is the device layer's (ground/device/functors.hpp), so host and device reduce alike.
//
// Define STRATA_ISA (a namespace name) before including.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ground/device/functors.hpp"
#include "ground/reduce.hpp"

namespace strata::STRATA_ISA {

using elementwise::Element;
using elementwise::Max;
using elementwise::Min;
using elementwise::Prod;
using elementwise::Sum;

// dst[i] = a[i] op b[i] through E's accumulation type: 8- and 16-bit floats round back
// after every step. The operands never overlap except dst == a, and each case gets its
// own loop with restrict pointers, so the compiler vectorises without run-time alias
// checks. Reading the local operand from another buffer (dst != a) saves copying it into
// dst first.
template <typename E, typename Op>
void kernel(void* dst, const void* a, const void* b, size_t n) {
  using S = typename E::Storage;
  const S* __restrict y = static_cast<const S*>(b);
  Op op;
  if (dst == a) {
    S* __restrict d = static_cast<S*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = E::store(op(E::load(d[i]), E::load(y[i])));
  } else {
    S* __restrict d = static_cast<S*>(dst);
    const S* __restrict x = static_cast<const S*>(a);
    for (size_t i = 0; i < n; ++i) d[i] = E::store(op(E::load(x[i]), E::load(y[i])));
  }
}

// Provided by each instruction-set file: the 16-bit kernels (vector code where it can).
template <typename Op>
void half_kernel(void* dst, const void* a, const void* b, size_t n);
template <typename Op>
void bf16_kernel(void* dst, const void* a, const void* b, size_t n);

template <typename Op>
ReduceFn for_type(DataType t) {
  switch (t) {
    case DataType::float16: return half_kernel<Op>;
    case DataType::bfloat16: return bf16_kernel<Op>;
    default: return elementwise::with_element(t, [](auto e) -> ReduceFn { return kernel<decltype(e), Op>; });
  }
}

inline ReduceFn table_lookup(DataType type, ReduceOp op) {
  if (!is_valid(type) || !is_valid(op)) return nullptr;
  return elementwise::with_op(op, [&](auto o) { return for_type<decltype(o)>(type); });
}

}  // namespace strata::STRATA_ISA
