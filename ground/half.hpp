// IEEE fp16 and bfloat16 <-> fp32 conversion; fp32 -> 16-bit rounds to nearest even.
// Host and device code (ground/host_device.hpp); static, for the reason given there.
#pragma once

#include <cstdint>

#include "ground/host_device.hpp"

namespace strata {

STRATA_HD static inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000 | (mant << 13));  // inf / nan
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

STRATA_HD static inline uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) return sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00);  // nan stays nan
  if (x >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (x < 0x38800000) {
    // Below the smallest normal half (2^-14): adding 0.5 puts the value's 2^-24 steps
    // into the float mantissa, and the FPU's own rounding is round-to-nearest-even.
    float a = bits_float(x) + 0.5f;
    return sign | static_cast<uint16_t>(float_bits(a) - 0x3f000000u);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd;
  return sign | static_cast<uint16_t>(x >> 13);
}

STRATA_HD static inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

STRATA_HD static inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace strata
