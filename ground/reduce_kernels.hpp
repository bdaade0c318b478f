// The reduction kernels, compiled once per instruction set: this header is included by
// reduce_generic.cpp (any x86-64) and reduce_avx2.cpp (-mavx2 -mf16c), and reduce.cpp picks
// the table the CPU supports at run time, so one binary runs everywhere.
//
// Define STRATA_ISA (a namespace name) before including.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ground/half.hpp"
#include "ground/reduce.hpp"

namespace strata::STRATA_ISA {

// Integer + and * wrap (two's complement) instead of being undefined on overflow.
template <typename T>
inline T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote to at least unsigned int so uint8/int8 products do not promote to int.
    using P = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b)));
  } else {
    return a * b;
  }
}

struct Sum {
  template <typename T> T operator()(T a, T b) const { return add(a, b); }
};
struct Prod {
  template <typename T> T operator()(T a, T b) const { return mul(a, b); }
};
struct Max {
  template <typename T> T operator()(T a, T b) const { return a < b ? b : a; }
};
struct Min {
  template <typename T> T operator()(T a, T b) const { return b < a ? b : a; }
};

// The operands never overlap except dst == a, and each case gets its own loop with
// restrict pointers, so the compiler vectorises without run-time alias checks. Reading the
// local operand from another buffer (dst != a) saves copying it into dst first.
template <typename T, typename Op>
void kernel(void* dst, const void* a, const void* b, size_t n) {
  const T* __restrict y = static_cast<const T*>(b);
  Op op;
  if (dst == a) {
    T* __restrict d = static_cast<T*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = op(d[i], y[i]);
  } else {
    T* __restrict d = static_cast<T*>(dst);
    const T* __restrict x = static_cast<const T*>(a);
    for (size_t i = 0; i < n; ++i) d[i] = op(x[i], y[i]);
  }
}

// 16-bit floats reduce in fp32 and round back to nearest even after every step. Element i
// is read before it is written, so dst == a is safe.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), typename Op>
void kernel16_scalar(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n) {
  Op op;
  for (size_t i = 0; i < n; ++i) d[i] = FromF(op(ToF(x[i]), ToF(y[i])));
}

// Provided by each instruction-set file: the 16-bit kernels (vector code where it can).
template <typename Op>
void half_kernel(void* dst, const void* a, const void* b, size_t n);
template <typename Op>
void bf16_kernel(void* dst, const void* a, const void* b, size_t n);

template <typename Op>
ReduceFn for_type(DataType t) {
  switch (t) {
    case DataType::int8: return kernel<int8_t, Op>;
    case DataType::uint8: return kernel<uint8_t, Op>;
    case DataType::int32: return kernel<int32_t, Op>;
    case DataType::uint32: return kernel<uint32_t, Op>;
    case DataType::int64: return kernel<int64_t, Op>;
    case DataType::uint64: return kernel<uint64_t, Op>;
    case DataType::float16: return half_kernel<Op>;
    case DataType::bfloat16: return bf16_kernel<Op>;
    case DataType::float32: return kernel<float, Op>;
    case DataType::float64: return kernel<double, Op>;
  }
  return nullptr;
}

inline ReduceFn table_lookup(DataType type, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return for_type<Sum>(type);
    case ReduceOp::prod: return for_type<Prod>(type);
    case ReduceOp::max: return for_type<Max>(type);
    case ReduceOp::min: return for_type<Min>(type);
  }
  return nullptr;
}

}  // namespace strata::STRATA_ISA
