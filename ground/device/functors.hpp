// The element-wise arithmetic of reductions, written once for every DataType and
// ReduceOp and compiled by g++ (host kernels: ground/reduce_kernels.hpp; the emulated
// backend) and by nvcc (the CUDA backend's kernels), so the arithmetic CI tests is the
// arithmetic the GPU runs.
//
// - Element<D>: the storage type, the type a reduction accumulates in (fp32 for 8- and
//   16-bit floats, the type itself otherwise) and the conversions between them (fp32 ->
//   8/16 bits rounds to nearest even; fp8 saturates: ground/fp8.hpp).
// - Sum, Prod, Max, Min on the accumulation type; integers wrap (two's complement)
//   instead of being undefined on overflow. avg is Sum, then divide() by the rank count.
// - with_element / with_op: a run-time DataType / ReduceOp to these types (host code).
//
// Everything has internal linkage (ground/host_device.hpp says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ground/fp8.hpp"
#include "ground/half.hpp"
#include "ground/host_device.hpp"
#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata::elementwise {
namespace {

template <typename T>
STRATA_HD inline T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
STRATA_HD inline T mul(T a, T b) {
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
  template <typename T> STRATA_HD T operator()(T a, T b) const { return add(a, b); }
};
struct Prod {
  template <typename T> STRATA_HD T operator()(T a, T b) const { return mul(a, b); }
};
struct Max {
  template <typename T> STRATA_HD T operator()(T a, T b) const { return a < b ? b : a; }
};
struct Min {
  template <typename T> STRATA_HD T operator()(T a, T b) const { return b < a ? b : a; }
};

template <DataType D>
struct Element;

// Types that accumulate in themselves.
template <DataType D, typename T>
struct Plain {
  static constexpr DataType type = D;
  using Storage = T;
  using Acc = T;
  STRATA_HD static T load(T s) { return s; }
  STRATA_HD static T store(T a) { return a; }
};
template <> struct Element<DataType::int8> : Plain<DataType::int8, int8_t> {};
template <> struct Element<DataType::uint8> : Plain<DataType::uint8, uint8_t> {};
template <> struct Element<DataType::int32> : Plain<DataType::int32, int32_t> {};
template <> struct Element<DataType::uint32> : Plain<DataType::uint32, uint32_t> {};
template <> struct Element<DataType::int64> : Plain<DataType::int64, int64_t> {};
template <> struct Element<DataType::uint64> : Plain<DataType::uint64, uint64_t> {};
template <> struct Element<DataType::float32> : Plain<DataType::float32, float> {};
template <> struct Element<DataType::float64> : Plain<DataType::float64, double> {};

// 8- and 16-bit floats: stored as bits, accumulated in fp32.
template <DataType D, typename Bits>
struct NarrowFloat {
  static constexpr DataType type = D;
  using Storage = Bits;
  using Acc = float;
};
template <> struct Element<DataType::float16> : NarrowFloat<DataType::float16, uint16_t> {
  STRATA_HD static float load(uint16_t s) { return half_to_float(s); }
  STRATA_HD static uint16_t store(float a) { return float_to_half(a); }
};
template <> struct Element<DataType::bfloat16> : NarrowFloat<DataType::bfloat16, uint16_t> {
  STRATA_HD static float load(uint16_t s) { return bf16_to_float(s); }
  STRATA_HD static uint16_t store(float a) { return float_to_bf16(a); }
};
template <> struct Element<DataType::float8_e4m3> : NarrowFloat<DataType::float8_e4m3, uint8_t> {
  STRATA_HD static float load(uint8_t s) { return float8_e4m3_to_float(s); }
  STRATA_HD static uint8_t store(float a) { return float_to_float8_e4m3(a); }
};
template <> struct Element<DataType::float8_e5m2> : NarrowFloat<DataType::float8_e5m2, uint8_t> {
  STRATA_HD static float load(uint8_t s) { return float8_e5m2_to_float(s); }
  STRATA_HD static uint8_t store(float a) { return float_to_float8_e5m2(a); }
};

// Element i of srcs[0] op srcs[1] op ... op srcs[nsrc-1], accumulated in E::Acc and
// rounded once.
template <typename E, typename Op>
STRATA_HD inline typename E::Storage reduce_at(const typename E::Storage* const* srcs, int nsrc, size_t i) {
  Op op;
  typename E::Acc acc = E::load(srcs[0][i]);
  for (int k = 1; k < nsrc; ++k) acc = op(acc, E::load(srcs[k][i]));
  return E::store(acc);
}

// avg's last step: x / n, in the accumulation type (integers: truncating, computed in 64
// bits so that any n works for 8-bit types).
template <typename E>
STRATA_HD inline typename E::Storage divide(typename E::Storage x, int n) {
  using A = typename E::Acc;
  if constexpr (std::is_integral_v<A>) {
    using Wide = std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>;
    return static_cast<A>(static_cast<Wide>(x) / static_cast<Wide>(n));
  } else {
    return E::store(E::load(x) / static_cast<A>(n));
  }
}

// f(Element<t>{}): one call site per DataType, from one generic function.
template <typename F>
decltype(auto) with_element(DataType t, F&& f) {
  switch (t) {
    case DataType::int8: return f(Element<DataType::int8>{});
    case DataType::uint8: return f(Element<DataType::uint8>{});
    case DataType::int32: return f(Element<DataType::int32>{});
    case DataType::uint32: return f(Element<DataType::uint32>{});
    case DataType::int64: return f(Element<DataType::int64>{});
    case DataType::uint64: return f(Element<DataType::uint64>{});
    case DataType::float16: return f(Element<DataType::float16>{});
    case DataType::bfloat16: return f(Element<DataType::bfloat16>{});
    case DataType::float32: return f(Element<DataType::float32>{});
    case DataType::float64: return f(Element<DataType::float64>{});
    case DataType::float8_e4m3: return f(Element<DataType::float8_e4m3>{});
    case DataType::float8_e5m2: return f(Element<DataType::float8_e5m2>{});
  }
  throw InvalidArgument("data type " + std::to_string(static_cast<int>(t)) + " is not one of strata::DataType");
}

// f(Op{}) for the op's element-wise step (avg: Sum).
template <typename F>
decltype(auto) with_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return f(Sum{});
    case ReduceOp::prod: return f(Prod{});
    case ReduceOp::max: return f(Max{});
    case ReduceOp::min: return f(Min{});
  }
  throw InvalidArgument("reduce op " + std::to_string(static_cast<int>(op)) + " is not one of strata::ReduceOp");
}

}  // namespace
}  // namespace strata::elementwise
