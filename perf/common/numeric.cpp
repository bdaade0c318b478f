#include "numeric.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace perf {

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class T>
void put(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

template <class T>
T get(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

// Through int64 so that out-of-range values wrap (C++20 defines the narrowing).
template <class T>
T wrap_signed(double v) {
  return static_cast<T>(static_cast<int64_t>(v));
}

template <class T>
T wrap_unsigned(double v) {
  if (v < 0) return static_cast<T>(static_cast<int64_t>(v));
  return static_cast<T>(static_cast<uint64_t>(v));
}

}  // namespace

uint16_t float_to_half(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Scale so that one half-subnormal ulp (2^-24) becomes 1.0 and round to nearest even.
    const float scaled = float_of(abs) * 16777216.0f;  // exact: a power of two
    const float r = std::nearbyint(scaled);           // default rounding: to nearest even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  // Normal: rebias the exponent, round 13 dropped mantissa bits to nearest even.
  uint32_t m = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t lsb = (m >> 13) & 1u;
  m += 0x0fffu + lsb;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(m >> 13));
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (man << 13));
  return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t float_to_bf16(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

namespace {

// The layout of one fp8 format: exponent and mantissa bits, bias, largest finite value.
struct Fp8Format {
  int mbits, bias;
  double max_finite;
  bool inf;  // e5m2 has infinities (exponent all ones); e4m3 only NaN at S.1111.111
};
Fp8Format fp8_format(DataType t) {
  if (t == DataType::float8_e4m3) return {3, 7, 448.0, false};
  return {2, 15, 57344.0, true};
}

}  // namespace

double fp8_to_double(uint8_t code, DataType t) {
  const Fp8Format f = fp8_format(t);
  const int ebits = 7 - f.mbits;
  const int e = (code >> f.mbits) & ((1 << ebits) - 1), m = code & ((1 << f.mbits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (f.inf && e == (1 << ebits) - 1) return m ? std::nan("") : sign * HUGE_VAL;
  if (!f.inf && e == (1 << ebits) - 1 && m == (1 << f.mbits) - 1) return std::nan("");
  if (e == 0) return sign * std::ldexp(m, 1 - f.bias - f.mbits);
  return sign * std::ldexp((1 << f.mbits) + m, e - f.bias - f.mbits);
}

uint8_t double_to_fp8(double v, DataType t) {
  const Fp8Format f = fp8_format(t);
  if (std::isnan(v)) return 0x7f;  // both formats: S.1111.111 is a NaN
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  double a = std::fabs(v);
  if (a >= f.max_finite) a = f.max_finite;  // saturating
  // The quantum at a's binade (the subnormals' below the smallest normal), and a rounded
  // to a multiple of it, ties to even.
  const int emin = 1 - f.bias;
  int e = a > 0 ? std::ilogb(a) : emin;
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - f.mbits);
  const double n = std::nearbyint(a / q);  // the default rounding mode: to nearest even
  const double r = n * q;
  if (r == 0) return sign;
  int re = std::ilogb(r);
  if (re < emin) return static_cast<uint8_t>(sign | static_cast<int>(r / std::ldexp(1.0, emin - f.mbits)));
  const int m = static_cast<int>(r / std::ldexp(1.0, re - f.mbits)) - (1 << f.mbits);
  return static_cast<uint8_t>(sign | ((re + f.bias) << f.mbits) | m);
}

void store(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::int8: put(buf, i, wrap_signed<int8_t>(v)); return;
    case DataType::uint8: put(buf, i, wrap_unsigned<uint8_t>(v)); return;
    case DataType::int32: put(buf, i, wrap_signed<int32_t>(v)); return;
    case DataType::uint32: put(buf, i, wrap_unsigned<uint32_t>(v)); return;
    case DataType::int64: put(buf, i, wrap_signed<int64_t>(v)); return;
    case DataType::uint64: put(buf, i, wrap_unsigned<uint64_t>(v)); return;
    case DataType::float16: put(buf, i, float_to_half(static_cast<float>(v))); return;
    case DataType::bfloat16: put(buf, i, float_to_bf16(static_cast<float>(v))); return;
    case DataType::float32: put(buf, i, static_cast<float>(v)); return;
    case DataType::float64: put(buf, i, v); return;
    case DataType::float8_e4m3:
    case DataType::float8_e5m2: put(buf, i, double_to_fp8(v, t)); return;
  }
  throw std::logic_error(std::string("perf: no values for type ") + std::to_string(static_cast<int>(t)));
}

double load(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::int8: return get<int8_t>(buf, i);
    case DataType::uint8: return get<uint8_t>(buf, i);
    case DataType::int32: return get<int32_t>(buf, i);
    case DataType::uint32: return get<uint32_t>(buf, i);
    case DataType::int64: return static_cast<double>(get<int64_t>(buf, i));
    case DataType::uint64: return static_cast<double>(get<uint64_t>(buf, i));
    case DataType::float16: return half_to_float(get<uint16_t>(buf, i));
    case DataType::bfloat16: return bf16_to_float(get<uint16_t>(buf, i));
    case DataType::float32: return get<float>(buf, i);
    case DataType::float64: return get<double>(buf, i);
    case DataType::float8_e4m3:
    case DataType::float8_e5m2: return fp8_to_double(get<uint8_t>(buf, i), t);
  }
  throw std::logic_error(std::string("perf: no values for type ") + std::to_string(static_cast<int>(t)));
}

double round_to(DataType t, double v) {
  unsigned char tmp[8];
  store(t, tmp, 0, v);
  return load(t, tmp, 0);
}

double epsilon(DataType t) {
  switch (t) {
    case DataType::float16: return std::ldexp(1.0, -11);
    case DataType::bfloat16: return std::ldexp(1.0, -8);
    case DataType::float32: return std::ldexp(1.0, -24);
    case DataType::float64: return std::ldexp(1.0, -53);
    case DataType::float8_e4m3: return std::ldexp(1.0, -4);
    case DataType::float8_e5m2: return std::ldexp(1.0, -3);
    default: return 0;
  }
}

}  // namespace perf
