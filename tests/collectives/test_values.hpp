// Deterministic test inputs and the serial reference for every DataType and ReduceOp.
// Every rank can regenerate any rank's input from (seed, rank, index), so each rank
// computes the expected result of a collective on its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "strata/types.hpp"
#include "../common/narrow_float_reference.hpp"

namespace strata_test {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Per-(seed, rank) base; the value hash for element i is mix64(base + i).
inline uint64_t rank_base(uint64_t seed, int rank) {
  return mix64(seed ^ (static_cast<uint64_t>(rank + 1) * 0x632BE59BD9B4E019ULL));
}

// ---- IEEE half and bfloat16, written independently of the library ----
inline long double f16_to_ld(uint16_t h) {
  int sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  long double v;
  if (e == 0)
    v = std::ldexp(static_cast<long double>(m), -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<long double>(1024 + m), e - 25);
  return sign ? -v : v;
}
inline uint16_t f32_to_f16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
  if (ax >= 0x477ff000) return sign | 0x7c00;  // rounds to infinity
  if (ax < 0x38800000) {                       // half subnormal (or zero)
    float a = std::fabs(f);
    long m = std::lrint(std::ldexp(static_cast<double>(a), 24));  // RNE in default mode
    return sign | static_cast<uint16_t>(m);
  }
  uint32_t e = (ax >> 23) - 127 + 15, man = ax & 0x7fffff;
  uint32_t h = (e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}
inline long double bf16_to_ld(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// ---- fp8, from the formats' reference (tests/common/narrow_float_reference.hpp) ----
inline long double e4m3_to_ld(uint8_t c) { return narrow_decode(kE4M3, c); }
inline uint8_t f32_to_e4m3(float f) { return static_cast<uint8_t>(narrow_encode(kE4M3, f)); }
inline long double e5m2_to_ld(uint8_t c) { return narrow_decode(kE5M2, c); }
inline uint8_t f32_to_e5m2(float f) { return static_cast<uint8_t>(narrow_encode(kE5M2, f)); }

// ---- per-type traits: storage type S, reference type C, value generators ----
template <strata::DataType D>
struct TT;

template <class S_, class C_, bool Signed, int64_t SumRange>
struct IntTraits {
  using S = S_;
  using C = C_;
  static constexpr bool flt = false;
  static constexpr bool is_signed = Signed;
  static C dec(S s) { return static_cast<C>(s); }
  static S enc(C c) { return static_cast<S>(c); }
  static S from_int(int v) { return static_cast<S>(v); }
  // Values for sum/avg: |x| <= R with R chosen so that n contributions never overflow.
  static S gen_sum(uint64_t h, int n) {
    int64_t R = SumRange;
    if (SumRange < (int64_t(1) << 20)) R = std::max<int64_t>(1, SumRange / n);
    if (Signed) return static_cast<S>(static_cast<int64_t>(h % (2 * R + 1)) - R);
    return static_cast<S>(h % (R + 1));
  }
  static S gen_any(uint64_t h) { return static_cast<S>(h); }  // max/min: full range
  static std::string show(S s) {
    char b[64];
    if (Signed)
      snprintf(b, sizeof b, "%lld", static_cast<long long>(s));
    else
      snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(s));
    return b;
  }
};

template <>
struct TT<strata::DataType::int8> : IntTraits<int8_t, int64_t, true, 120> {};
template <>
struct TT<strata::DataType::uint8> : IntTraits<uint8_t, uint64_t, false, 250> {};
template <>
struct TT<strata::DataType::int32> : IntTraits<int32_t, int64_t, true, int64_t(1) << 20> {};
template <>
struct TT<strata::DataType::uint32> : IntTraits<uint32_t, uint64_t, false, int64_t(1) << 24> {};
template <>
struct TT<strata::DataType::int64> : IntTraits<int64_t, int64_t, true, int64_t(1) << 40> {};
template <>
struct TT<strata::DataType::uint64> : IntTraits<uint64_t, uint64_t, false, int64_t(1) << 50> {};

struct FloatBase {
  using C = long double;
  static constexpr bool flt = true;
  static constexpr bool is_signed = true;
};

// 8- and 16-bit floats: small integer sums are exact. `Mantissa` bits; sums draw from
// [-R, R] with R = min(SumRange, SumBudget / n), so every partial sum is an integer the
// type holds; other inputs are (k - AnyHalf) / AnyDiv for k in [0, 2 * AnyHalf], rounded
// to the type.
template <typename S_, long double (*Dec)(S_), S_ (*Enc)(float), int Mantissa, int SumRange, int SumBudget,
          int AnyHalf, int AnyDiv>
struct NarrowFloatTraits : FloatBase {
  using S = S_;
  static constexpr bool small_int_sums = true;
  static constexpr long double ulp_rel = 1.0L / (1 << Mantissa);  // ulp(x) <= ulp_rel * |x|
  static C dec(S s) { return Dec(s); }
  static S enc(C c) { return Enc(static_cast<float>(c)); }
  static S from_int(int v) { return enc(v); }
  static S gen_sum(uint64_t h, int n) {
    int R = std::max(1, std::min(SumRange, SumBudget / n));
    return enc(static_cast<int>(h % (2 * R + 1)) - R);
  }
  static S gen_any(uint64_t h) {
    return enc((static_cast<int>(h % (2 * AnyHalf + 1)) - AnyHalf) / static_cast<long double>(AnyDiv));
  }
  static std::string show(S s) {
    char b[64];
    snprintf(b, sizeof b, "%.8Lg (0x%04x)", dec(s), s);
    return b;
  }
};
template <>
struct TT<strata::DataType::float16> : NarrowFloatTraits<uint16_t, f16_to_ld, f32_to_f16, 10, 64, 2048, 2000, 4> {};
template <>
struct TT<strata::DataType::bfloat16> : NarrowFloatTraits<uint16_t, bf16_to_ld, f32_to_bf16, 7, 16, 256, 127, 2> {};
// fp8: integers are exact up to 16 (e4m3) and 8 (e5m2).
template <>
struct TT<strata::DataType::float8_e4m3> : NarrowFloatTraits<uint8_t, e4m3_to_ld, f32_to_e4m3, 3, 4, 16, 15, 2> {};
template <>
struct TT<strata::DataType::float8_e5m2> : NarrowFloatTraits<uint8_t, e5m2_to_ld, f32_to_e5m2, 2, 2, 8, 15, 2> {};
template <>
struct TT<strata::DataType::float32> : FloatBase {
  using S = float;
  static constexpr bool small_int_sums = false;
  static constexpr long double ulp_rel = 0x1p-23L;
  static C dec(S s) { return s; }
  static S enc(C c) { return static_cast<float>(c); }
  static S from_int(int v) { return static_cast<float>(v); }
  // magnitude in [0.5, 1.5), exactly representable, random sign
  static S gen_sum(uint64_t h, int) {
    float m = 0.5f + std::ldexp(static_cast<float>(h >> 41), -23);
    return (h & 1) ? -m : m;
  }
  static S gen_any(uint64_t h) {
    return static_cast<float>(std::ldexp(static_cast<double>(static_cast<int64_t>(h >> 11) - (int64_t(1) << 52)), -40));
  }
  static std::string show(S s) {
    uint32_t x;
    std::memcpy(&x, &s, 4);
    char b[64];
    snprintf(b, sizeof b, "%.9g (0x%08x)", s, x);
    return b;
  }
};
template <>
struct TT<strata::DataType::float64> : FloatBase {
  using S = double;
  static constexpr bool small_int_sums = false;
  static constexpr long double ulp_rel = 0x1p-52L;
  static C dec(S s) { return s; }
  static S enc(C c) { return static_cast<double>(c); }
  static S from_int(int v) { return v; }
  static S gen_sum(uint64_t h, int) {
    double m = 0.5 + std::ldexp(static_cast<double>(h >> 12), -52);
    return (h & 1) ? -m : m;
  }
  static S gen_any(uint64_t h) {
    return std::ldexp(static_cast<double>(static_cast<int64_t>(h >> 11) - (int64_t(1) << 52)), -40);
  }
  static std::string show(S s) {
    uint64_t x;
    std::memcpy(&x, &s, 8);
    char b[80];
    snprintf(b, sizeof b, "%.17g (0x%016llx)", s, static_cast<unsigned long long>(x));
    return b;
  }
};

// Input for a reduction with `op`: prod uses {1,-1,2} ({1,2} unsigned) with at most six
// 2s per element; sum/avg small enough not to overflow; max/min anything finite.
template <strata::DataType D>
typename TT<D>::S gen_reduce_input(strata::ReduceOp op, uint64_t h, int rank, int n) {
  using T = TT<D>;
  switch (op) {
    case strata::ReduceOp::prod: {
      if (rank < 6 && ((h >> 8) & 7) == 0) return T::from_int(2);
      if (T::is_signed && (h & 1)) return T::from_int(-1);
      return T::from_int(1);
    }
    case strata::ReduceOp::sum:
    case strata::ReduceOp::avg:
      return T::gen_sum(h, n);
    default:
      return T::gen_any(h);
  }
}

// Raw bits for data-movement collectives (compared bit for bit).
template <class S>
S gen_raw(uint64_t h) {
  S s;
  std::memcpy(&s, &h, sizeof(S));
  return s;
}

template <class C>
C combine(strata::ReduceOp op, C a, C b) {
  switch (op) {
    case strata::ReduceOp::sum:
    case strata::ReduceOp::avg:
      return a + b;
    case strata::ReduceOp::prod:
      return a * b;
    case strata::ReduceOp::max:
      return a < b ? b : a;
    case strata::ReduceOp::min:
      return b < a ? b : a;
  }
  return a;
}

// Tolerance for a float result of reducing n inputs whose absolute values add to `sumabs`.
template <strata::DataType D>
long double tolerance(strata::ReduceOp op, int n, long double expected, long double sumabs) {
  using T = TT<D>;
  if constexpr (!T::flt) {
    return 0;
  } else {
    long double e = std::fabs(expected);
    switch (op) {
      case strata::ReduceOp::sum:
        // 8/16-bit float inputs are small integers: every partial sum is exact.
        return T::small_int_sums ? 0 : 2 * n * T::ulp_rel * sumabs;
      case strata::ReduceOp::avg:
        // exact sum, then one division and at most two roundings (fp32, then the type)
        return T::small_int_sums ? T::ulp_rel * e : 2 * T::ulp_rel * sumabs + T::ulp_rel * e;
      default:
        return 0;  // prod of {1,-1,2}, max, min: exact
    }
  }
}

}  // namespace strata_test
