// A reference for 8- and 16-bit floats written independently of the library: a code's
// value from the format's formula, and a value's code by searching the table of all codes
// for the nearest (ties to the even code), the way the formats define rounding. fp8
// saturates as CUDA's __NV_SATFINITE conversions do: beyond the largest finite value
// (infinity too) is the largest finite value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "strata/types.hpp"

namespace strata_test {

struct NarrowFormat {
  int bits, exp_bits, man_bits;
  bool ieee;        // the all-ones exponent is infinity/NaN (else only the all-ones code is NaN)
  bool saturates;   // to the largest finite value, instead of rounding to infinity
};
inline constexpr NarrowFormat kHalf{16, 5, 10, true, false};
inline constexpr NarrowFormat kBfloat16{16, 8, 7, true, false};
inline constexpr NarrowFormat kE4M3{8, 4, 3, false, true};
inline constexpr NarrowFormat kE5M2{8, 5, 2, true, true};

inline const NarrowFormat* narrow_format(strata::DataType t) {
  switch (t) {
    case strata::DataType::float16: return &kHalf;
    case strata::DataType::bfloat16: return &kBfloat16;
    case strata::DataType::float8_e4m3: return &kE4M3;
    case strata::DataType::float8_e5m2: return &kE5M2;
    default: return nullptr;
  }
}

// (-1)^s 2^(e - bias) (1 + m / 2^M); subnormal (-1)^s 2^(1 - bias) m / 2^M.
inline double narrow_decode(const NarrowFormat& f, uint32_t code) {
  const uint32_t exp_all = (1u << f.exp_bits) - 1, man_all = (1u << f.man_bits) - 1;
  const bool negative = (code >> (f.bits - 1)) & 1;
  const uint32_t e = (code >> f.man_bits) & exp_all, m = code & man_all;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  double v;
  if (f.ieee && e == exp_all)
    v = m ? NAN : INFINITY;
  else if (!f.ieee && e == exp_all && m == man_all)
    v = NAN;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - f.man_bits);
  else
    v = std::ldexp(static_cast<double>((1u << f.man_bits) + m), static_cast<int>(e) - bias - f.man_bits);
  return negative ? -v : v;
}

// The non-negative codes a value may round to, ascending by value: every finite one, and
// for formats that round to infinity, infinity standing at 2^(emax + 1), where IEEE puts
// the overflow threshold.
inline const std::vector<std::pair<double, uint32_t>>& narrow_table(const NarrowFormat& f) {
  static std::vector<std::pair<double, uint32_t>> tables[4];
  auto& t = tables[&f == &kHalf ? 0 : &f == &kBfloat16 ? 1 : &f == &kE4M3 ? 2 : 3];
  if (!t.empty()) return t;
  double largest = 0;
  for (uint32_t c = 0; c < (1u << (f.bits - 1)); ++c) {
    const double v = narrow_decode(f, c);
    if (std::isfinite(v)) t.push_back({v, c}), largest = std::max(largest, v);
  }
  if (!f.saturates) {
    const uint32_t inf = ((1u << f.exp_bits) - 1) << f.man_bits;
    t.push_back({std::ldexp(1.0, std::ilogb(largest) + 1), inf});
  }
  std::sort(t.begin(), t.end());
  return t;
}

// The nearest code to x, ties to the even code; NaN gives a NaN code.
inline uint32_t narrow_encode(const NarrowFormat& f, double x) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.bits - 1) : 0u;
  if (std::isnan(x)) return ((1u << (f.bits - 1)) - 1);  // all ones but the sign: NaN in every format here
  const auto& t = narrow_table(f);
  const double a = std::fabs(x);
  if (a >= t.back().first) return sign | t.back().second;  // infinity, or saturated
  auto hi = std::lower_bound(t.begin(), t.end(), std::make_pair(a, 0u));
  if (hi == t.begin()) return sign | hi->second;
  auto lo = hi - 1;
  const double dlo = a - lo->first, dhi = hi->first - a;
  if (dlo != dhi) return sign | (dlo < dhi ? lo : hi)->second;
  return sign | ((lo->second & 1) ? hi : lo)->second;
}

inline bool narrow_is_nan(const NarrowFormat& f, uint32_t code) { return std::isnan(narrow_decode(f, code)); }

}  // namespace strata_test
