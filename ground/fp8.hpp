// fp8 <-> fp32 conversion for the two OCP 8-bit formats (as CUDA's __nv_fp8_e4m3 and
// __nv_fp8_e5m2 convert): e4m3 (4 exponent bits, bias 7, 3 mantissa bits; no infinity,
// S.1111.111 is NaN, largest 448) and e5m2 (IEEE-like: 5 exponent bits, bias 15, 2
// mantissa bits, infinities; largest finite 57344). fp32 -> fp8 rounds to nearest even
// and saturates: a value beyond the largest finite (infinity too) becomes it, with its
// sign (__NV_SATFINITE); NaN becomes the NaN 0x7f. Host and device code
// (ground/host_device.hpp).
#pragma once

#include <cstdint>

#include "ground/host_device.hpp"

namespace strata {

namespace {  // internal linkage, as static functions (ground/host_device.hpp says why)

template <int ExpBits, int ManBits, bool Ieee>
struct Fp8Format {
  static constexpr int kBias = (1 << (ExpBits - 1)) - 1;
  static constexpr uint32_t kExpMask = (1u << ExpBits) - 1;
  static constexpr uint32_t kManMask = (1u << ManBits) - 1;
  // Largest finite: below the all-ones exponent (IEEE), or all ones but the last
  // mantissa bit (the code above it is NaN).
  static constexpr uint8_t kMaxCode = Ieee ? static_cast<uint8_t>(((kExpMask - 1) << ManBits) | kManMask)
                                           : static_cast<uint8_t>((kExpMask << ManBits) | (kManMask - 1));
  static constexpr uint8_t kNaN = 0x7f;
  static constexpr int kShift = 23 - ManBits;  // fp32 mantissa bits dropped
  // fp32 bits of the smallest normal fp8 value, 2^(1 - bias).
  static constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(128 - kBias) << 23;
  // 2^(1 - bias - ManBits + 23): a float whose last mantissa bit is worth the smallest
  // fp8 subnormal, so adding it rounds a subnormal value to its code (in fp32's rounding,
  // which is to nearest even).
  static constexpr uint32_t kSubnormalBiasBits = static_cast<uint32_t>(127 + 1 - kBias - ManBits + 23) << 23;

  STRATA_HD static float to_float(uint8_t b) {
    const uint32_t sign = static_cast<uint32_t>(b & 0x80) << 24;
    const uint32_t exp = (b >> ManBits) & kExpMask;
    const uint32_t man = b & kManMask;
    if (Ieee && exp == kExpMask) return bits_float(sign | 0x7f800000u | (man ? 0x400000u : 0u));  // inf, NaN
    if (!Ieee && (b & 0x7f) == 0x7f) return bits_float(sign | 0x7fc00000u);                    // NaN
    if (exp == 0) {  // zero or subnormal: man * 2^(1 - bias - ManBits), exact in fp32
      const float f = static_cast<float>(man) * bits_float(static_cast<uint32_t>(127 + 1 - kBias - ManBits) << 23);
      return sign ? -f : f;
    }
    return bits_float(sign | ((exp + 127 - kBias) << 23) | (man << kShift));
  }

  STRATA_HD static uint8_t from_float(float f) {
    const uint32_t x = float_bits(f);
    const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return kNaN;
    if (ax < kMinNormalBits) {
      const float a = bits_float(ax) + bits_float(kSubnormalBiasBits);
      return static_cast<uint8_t>(sign | (float_bits(a) - kSubnormalBiasBits));
    }
    // Round the dropped bits to nearest even (a carry moves into the exponent, as it
    // should), then rebias the exponent; anything past the largest finite saturates.
    const uint32_t odd = (ax >> kShift) & 1u;
    const uint32_t rounded =
        ((ax + (1u << (kShift - 1)) - 1u + odd) >> kShift) - (static_cast<uint32_t>(127 - kBias) << ManBits);
    return static_cast<uint8_t>(sign | (rounded > kMaxCode ? kMaxCode : rounded));
  }
};

using Fp8E4M3 = Fp8Format<4, 3, false>;
using Fp8E5M2 = Fp8Format<5, 2, true>;

}  // namespace

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// GPUs of compute capability 8.9 and later convert in hardware (PTX cvt, rounding to
// nearest even, .satfinite saturating to the largest finite value and making NaN 0x7f):
// the same results as the code above, without its data-dependent branches, which the
// reduce kernel's 16 conversions per source and per store turned into hundreds of branches
// (the software fp8 reduce against bf16's on an H200: docs/benchmarks.md, "Measured
// choices"). Older GPUs and the host run the code above.
#define STRATA_FP8_IN_HARDWARE 1
namespace {
__device__ inline float fp8_hardware_to_float(uint8_t b, bool e4m3) {
  const unsigned short in = b;
  unsigned int halves;
  if (e4m3) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(in));
  else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(halves) : "h"(in));
  float f;
  asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, lo; }" : "=f"(f) : "r"(halves));
  return f;
}
__device__ inline uint8_t fp8_hardware_from_float(float f, bool e4m3) {
  unsigned short out;  // the second operand's code in the low byte
  if (e4m3) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(out) : "f"(0.0f), "f"(f));
  else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(out) : "f"(0.0f), "f"(f));
  return static_cast<uint8_t>(out & 0xff);
}
}  // namespace
#endif

// Hardware where there is (above), the formats' code otherwise.
#ifdef STRATA_FP8_IN_HARDWARE
template <typename Format, bool E4M3>
struct Fp8Convert {
  __device__ static float to_float(uint8_t b) { return fp8_hardware_to_float(b, E4M3); }
  __device__ static uint8_t from_float(float f) { return fp8_hardware_from_float(f, E4M3); }
};
#else
template <typename Format, bool E4M3>
struct Fp8Convert : Format {};
#endif

STRATA_HD static inline float float8_e4m3_to_float(uint8_t b) { return Fp8Convert<Fp8E4M3, true>::to_float(b); }
STRATA_HD static inline uint8_t float_to_float8_e4m3(float f) { return Fp8Convert<Fp8E4M3, true>::from_float(f); }
STRATA_HD static inline float float8_e5m2_to_float(uint8_t b) { return Fp8Convert<Fp8E5M2, false>::to_float(b); }
STRATA_HD static inline uint8_t float_to_float8_e5m2(float f) { return Fp8Convert<Fp8E5M2, false>::from_float(f); }

}  // namespace strata
