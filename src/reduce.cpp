#include "reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "half.hpp"

namespace strata {

namespace {

// Integer + and * wrap (two's complement) instead of being undefined on overflow.
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T mul(T a, T b) {
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
  template <typename T> T operator()(T a, T b) const { return std::max(a, b); }
};
struct Min {
  template <typename T> T operator()(T a, T b) const { return std::min(a, b); }
};

template <typename T, typename Op>
void kernel(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  Op op;
  for (size_t i = 0; i < n; ++i) d[i] = op(d[i], s[i]);
}

// 16-bit floats reduce in fp32 and round back to nearest even after every step.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), typename Op>
void kernel16(void* dst, const void* src, size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  Op op;
  for (size_t i = 0; i < n; ++i) d[i] = FromF(op(ToF(d[i]), ToF(s[i])));
}

template <typename Op>
ReduceFn for_type(DataType t) {
  switch (t) {
    case DataType::int8: return kernel<int8_t, Op>;
    case DataType::uint8: return kernel<uint8_t, Op>;
    case DataType::int32: return kernel<int32_t, Op>;
    case DataType::uint32: return kernel<uint32_t, Op>;
    case DataType::int64: return kernel<int64_t, Op>;
    case DataType::uint64: return kernel<uint64_t, Op>;
    case DataType::float16: return kernel16<half_to_float, float_to_half, Op>;
    case DataType::bfloat16: return kernel16<bf16_to_float, float_to_bf16, Op>;
    case DataType::float32: return kernel<float, Op>;
    case DataType::float64: return kernel<double, Op>;
  }
  return nullptr;
}

template <typename T>
void divide(void* buf, size_t n, int by) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(by));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide16(void* buf, size_t n, int by) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / static_cast<float>(by));
}

}  // namespace

ReduceFn reduce_fn(DataType type, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return for_type<Sum>(type);
    case ReduceOp::prod: return for_type<Prod>(type);
    case ReduceOp::max: return for_type<Max>(type);
    case ReduceOp::min: return for_type<Min>(type);
  }
  return nullptr;
}

void finalize(void* buf, size_t count, DataType type, ReduceOp op, int nranks) {
  if (op != ReduceOp::avg || nranks == 1) return;
  switch (type) {
    case DataType::int8: return divide<int8_t>(buf, count, nranks);
    case DataType::uint8: return divide<uint8_t>(buf, count, nranks);
    case DataType::int32: return divide<int32_t>(buf, count, nranks);
    case DataType::uint32: return divide<uint32_t>(buf, count, nranks);
    case DataType::int64: return divide<int64_t>(buf, count, nranks);
    case DataType::uint64: return divide<uint64_t>(buf, count, nranks);
    case DataType::float16: return divide16<half_to_float, float_to_half>(buf, count, nranks);
    case DataType::bfloat16: return divide16<bf16_to_float, float_to_bf16>(buf, count, nranks);
    case DataType::float32: return divide<float>(buf, count, nranks);
    case DataType::float64: return divide<double>(buf, count, nranks);
  }
}

}  // namespace strata
