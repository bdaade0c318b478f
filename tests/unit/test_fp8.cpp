// fp8 e4m3/e5m2 <-> fp32 (ground/fp8.hpp) against the reference written from the formats'
// definitions (tests/common/narrow_float_reference.hpp): every code decodes to its value,
// and fp32 values on, between, just beside and beyond the codes round to the nearest code
// (ties to even), saturate to the largest finite value, and keep NaN a NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ground/fp8.hpp"
#include "tests/common/narrow_float_reference.hpp"

namespace strata {
namespace {

using strata_test::narrow_decode;
using strata_test::narrow_encode;
using strata_test::NarrowFormat;

struct Fp8 {
  const char* name;
  const NarrowFormat& format;
  float (*to_float)(uint8_t);
  uint8_t (*from_float)(float);
  float largest;
};
const Fp8 kFormats[] = {{"e4m3", strata_test::kE4M3, float8_e4m3_to_float, float_to_float8_e4m3, 448.0f},
                        {"e5m2", strata_test::kE5M2, float8_e5m2_to_float, float_to_float8_e5m2, 57344.0f}};

void expect_encodes(const Fp8& f, float x) {
  const uint8_t got = f.from_float(x);
  if (std::isnan(x)) {
    EXPECT_EQ(got, 0x7f) << f.name << ": NaN becomes the NaN code 0x7f";
    return;
  }
  EXPECT_EQ(got, narrow_encode(f.format, x)) << f.name << " of " << x << " (bits 0x" << std::hex << float_bits(x) << ")";
}

TEST(Fp8, EveryCodeDecodesToItsValue) {
  for (const Fp8& f : kFormats)
    for (unsigned c = 0; c < 256; ++c) {
      const double want = narrow_decode(f.format, c);
      const float got = f.to_float(static_cast<uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << f.name << " code " << c;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << f.name << " code " << c;
      }
    }
}

TEST(Fp8, ValuesOnBetweenAndBesideCodesRoundToNearestEven) {
  for (const Fp8& f : kFormats) {
    std::vector<float> finite;
    for (unsigned c = 0; c < 256; ++c) {
      const float v = f.to_float(static_cast<uint8_t>(c));
      if (std::isfinite(v)) finite.push_back(v);
    }
    std::sort(finite.begin(), finite.end());
    for (size_t i = 0; i < finite.size(); ++i) {
      const float v = finite[i];
      for (float x : {v, std::nextafter(v, INFINITY), std::nextafter(v, -INFINITY)}) expect_encodes(f, x);
      if (i + 1 < finite.size()) {
        const float mid = static_cast<float>((static_cast<double>(v) + finite[i + 1]) / 2);  // exact: few bits
        for (float x : {mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) expect_encodes(f, x);
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Fp8, OverflowSaturatesAndNanStaysNan) {
  for (const Fp8& f : kFormats) {
    for (float x : {f.largest * 1.0625f, f.largest * 1.2f, f.largest * 2, 1e30f, INFINITY}) {
      EXPECT_EQ(f.to_float(f.from_float(x)), f.largest) << f.name << " " << x;
      EXPECT_EQ(f.to_float(f.from_float(-x)), -f.largest) << f.name << " " << -x;
    }
    EXPECT_TRUE(std::isnan(f.to_float(f.from_float(NAN)))) << f.name;
    EXPECT_TRUE(std::isnan(f.to_float(f.from_float(-NAN)))) << f.name;
    EXPECT_EQ(f.from_float(-0.0f), 0x80) << f.name << ": -0 keeps its sign";
    EXPECT_EQ(f.from_float(-1e-30f), 0x80) << f.name << ": a negative underflow is -0";
  }
  EXPECT_EQ(float8_e5m2_to_float(0x7c), INFINITY);  // e5m2 has infinities; e4m3 does not
  EXPECT_TRUE(std::isnan(float8_e4m3_to_float(0x7f)));
  EXPECT_EQ(float8_e4m3_to_float(0x7e), 448.0f);
}

TEST(Fp8, RandomFloatsMatchTheReference) {
  std::mt19937 rng(8);
  for (const Fp8& f : kFormats)
    for (int i = 0; i < 200000; ++i) {
      uint32_t bits = rng();
      // Mostly exponents near the format's range, where rounding matters; some anywhere.
      if (i % 4) bits = (bits & 0x807fffffu) | ((100u + bits % 60u) << 23);
      expect_encodes(f, bits_float(bits));
      if (::testing::Test::HasFailure()) return;
    }
}

}  // namespace
}  // namespace strata
