// The serial reference for the device's reduce and finalize tasks, written independently
// of the library: elements are handled as raw bits of any DataType; integers wrap modulo
// 2^width, fp32 is computed in double and rounded to fp32 after each step (which is
// exactly fp32 arithmetic), fp64 in double, and 8/16-bit floats are decoded by their
// formula, accumulated in fp32 and encoded once by searching for the nearest code
// (tests/common/narrow_float_reference.hpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "strata/types.hpp"
#include "tests/common/narrow_float_reference.hpp"

namespace strata_test {

using strata::DataType;
using strata::ReduceOp;

// Bits of element i of a buffer of `type` (zero-extended).
inline uint64_t element_bits(const void* buf, size_t i, DataType type) {
  uint64_t v = 0;
  const size_t size = strata::size_of(type);
  std::memcpy(&v, static_cast<const char*>(buf) + i * size, size);
  return v;
}
inline void set_element_bits(void* buf, size_t i, DataType type, uint64_t v) {
  const size_t size = strata::size_of(type);
  std::memcpy(static_cast<char*>(buf) + i * size, &v, size);
}

namespace detail {

inline float f32(uint64_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits)); }
inline uint64_t bits32(float f) { return std::bit_cast<uint32_t>(f); }
inline double f64(uint64_t bits) { return std::bit_cast<double>(bits); }
inline uint64_t bits64(double d) { return std::bit_cast<uint64_t>(d); }

// a op b in fp32 (double's exact product/sum of two floats, rounded once to fp32).
inline float op32(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<float>(static_cast<double>(a) + b);
    case ReduceOp::prod: return static_cast<float>(static_cast<double>(a) * b);
    case ReduceOp::max: return a < b ? b : a;
    case ReduceOp::min: return b < a ? b : a;
  }
  return a;
}
inline double op64(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::max: return a < b ? b : a;
    case ReduceOp::min: return b < a ? b : a;
  }
  return a;
}

// Integers of `bits` bits: wrap modulo 2^bits, compare as signed or unsigned.
inline uint64_t op_int(ReduceOp op, uint64_t a, uint64_t b, int bits, bool is_signed) {
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  auto value = [&](uint64_t x) -> __int128 {
    x &= mask;
    if (is_signed && bits < 64 && (x >> (bits - 1)) & 1) return static_cast<__int128>(x) - (static_cast<__int128>(1) << bits);
    if (is_signed && bits == 64) return static_cast<int64_t>(x);
    return x;
  };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return (a + b) & mask;
    case ReduceOp::prod: return (a * b) & mask;
    case ReduceOp::max: return (value(a) < value(b) ? b : a) & mask;
    case ReduceOp::min: return (value(b) < value(a) ? b : a) & mask;
  }
  return a;
}

}  // namespace detail

// operands[0] op operands[1] op ..., as the device must compute it.
inline uint64_t reference_reduce(DataType t, ReduceOp op, const std::vector<uint64_t>& operands) {
  using namespace detail;
  if (const NarrowFormat* f = narrow_format(t)) {
    float acc = static_cast<float>(narrow_decode(*f, static_cast<uint32_t>(operands[0])));
    for (size_t k = 1; k < operands.size(); ++k)
      acc = op32(op, acc, static_cast<float>(narrow_decode(*f, static_cast<uint32_t>(operands[k]))));
    return narrow_encode(*f, acc);
  }
  if (t == DataType::float32) {
    float acc = f32(operands[0]);
    for (size_t k = 1; k < operands.size(); ++k) acc = op32(op, acc, f32(operands[k]));
    return bits32(acc);
  }
  if (t == DataType::float64) {
    double acc = f64(operands[0]);
    for (size_t k = 1; k < operands.size(); ++k) acc = op64(op, acc, f64(operands[k]));
    return bits64(acc);
  }
  uint64_t acc = operands[0];
  for (size_t k = 1; k < operands.size(); ++k)
    acc = op_int(op, acc, operands[k], static_cast<int>(strata::size_of(t) * 8), strata::is_signed(t));
  return acc;
}

// avg's last step: x / n (integers truncate; floats in fp32 for 8/16 bits).
inline uint64_t reference_divide(DataType t, uint64_t x, int n) {
  using namespace detail;
  if (const NarrowFormat* f = narrow_format(t))
    return narrow_encode(*f, static_cast<float>(static_cast<double>(static_cast<float>(narrow_decode(*f, static_cast<uint32_t>(x)))) / n));
  if (t == DataType::float32) return bits32(static_cast<float>(static_cast<double>(f32(x)) / n));
  if (t == DataType::float64) return bits64(f64(x) / n);
  const int bits = static_cast<int>(strata::size_of(t) * 8);
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  if (strata::is_signed(t)) {
    int64_t v = static_cast<int64_t>(x << (64 - bits)) >> (64 - bits);  // sign-extended
    return static_cast<uint64_t>(v / n) & mask;
  }
  return (x / static_cast<uint64_t>(n)) & mask;
}

// Equal bits, or both NaN.
inline bool same_element(DataType t, uint64_t got, uint64_t want) {
  if (got == want) return true;
  using namespace detail;
  if (const NarrowFormat* f = narrow_format(t)) return narrow_is_nan(*f, static_cast<uint32_t>(got)) && narrow_is_nan(*f, static_cast<uint32_t>(want));
  if (t == DataType::float32) return std::isnan(f32(got)) && std::isnan(f32(want));
  if (t == DataType::float64) return std::isnan(f64(got)) && std::isnan(f64(want));
  return false;
}

}  // namespace strata_test
