// fp16/bf16 conversions against independent references: the compiler's _Float16 (libgcc's
// conversion routines) for fp16, and a nearest-neighbour search in double for bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ground/half.hpp"

namespace strata {
namespace {

uint16_t ref_half_bits(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

TEST(Half, EveryHalfDecodesExactly) {
  for (uint32_t u = 0; u < 65536; ++u) {
    _Float16 h;
    uint16_t b = static_cast<uint16_t>(u);
    std::memcpy(&h, &b, 2);
    float want = static_cast<float>(h), got = half_to_float(b);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << u;
    } else {
      EXPECT_EQ(float_bits(got), float_bits(want)) << u;
      EXPECT_EQ(float_to_half(got), b) << "round trip " << u;
    }
  }
}

TEST(Half, RoundsToNearestEvenLikeTheCompiler) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    float f = bits_float(bits(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), ref_half_bits(f)) << "f=" << f;
    ++checked;
  }
  // Exact midpoints between neighbouring halves are where rounding mistakes hide.
  for (uint32_t u = 0; u < 0x7c00; ++u) {
    float lo = half_to_float(static_cast<uint16_t>(u)), hi = half_to_float(static_cast<uint16_t>(u + 1));
    float mid = (lo + hi) / 2;  // exact in fp32
    ASSERT_EQ(float_to_half(mid), ref_half_bits(mid)) << "midpoint after " << u;
    ASSERT_EQ(float_to_half(-mid), ref_half_bits(-mid));
  }
  EXPECT_GT(checked, 1000000);
}

uint16_t ref_bf16(float f) {
  uint32_t x = float_bits(f);
  uint16_t down = static_cast<uint16_t>(x >> 16), up = static_cast<uint16_t>(down + 1);
  double d_down = std::fabs(static_cast<double>(bf16_to_float(down)) - f);
  double d_up = std::fabs(static_cast<double>(bf16_to_float(up)) - f);
  if (d_down < d_up) return down;
  if (d_up < d_down) return up;
  return (down & 1) ? up : down;
}

TEST(Bf16, RoundsToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t x = bits(rng);
    float f = bits_float(x);
    if (std::isnan(f) || std::isinf(f) || (x & 0x7f800000) == 0x7f800000) continue;
    if ((x & 0x7fffffff) >= 0x7f7f8000) continue;  // rounds up to infinity: checked below
    ASSERT_EQ(float_to_bf16(f), ref_bf16(f)) << std::hex << x;
  }
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffff)), 0x7f80);  // largest float rounds to +inf
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  for (uint32_t u = 0; u < 0x7f80; ++u) EXPECT_EQ(float_to_bf16(bf16_to_float(static_cast<uint16_t>(u))), u);
}

}  // namespace
}  // namespace strata
