#include <gtest/gtest.h>

#include <cmath>

#include "numeric.hpp"
#include "options.hpp"

namespace perf {
namespace {

TEST(Half, KnownEncodings) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(float_to_half(1e9f), 0x7c00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(2049.0f), float_to_half(2048.0f));  // tie rounds to even
  EXPECT_EQ(float_to_half(2051.0f), float_to_half(2052.0f));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(Half, IntegersRoundTrip) {
  for (int i = -2048; i <= 2048; ++i) EXPECT_EQ(half_to_float(float_to_half(static_cast<float>(i))), i);
}

TEST(Bfloat16, IntegersRoundTripAndRounding) {
  for (int i = -256; i <= 256; ++i) EXPECT_EQ(bf16_to_float(float_to_bf16(static_cast<float>(i))), i);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(bf16_to_float(float_to_bf16(259.0f)), 260.0f);
}

// Every finite fp8 code decodes to a value that encodes back to it; known codes from the
// OCP spec; ties round to even; beyond the largest finite value saturates.
TEST(Fp8, EveryCodeRoundTripsAndKnownValuesHold) {
  for (DataType t : {DataType::float8_e4m3, DataType::float8_e5m2})
    for (int c = 0; c < 256; ++c) {
      const double v = fp8_to_double(static_cast<uint8_t>(c), t);
      if (std::isnan(v) || std::isinf(v)) continue;
      if (v == 0) {
        EXPECT_EQ(double_to_fp8(v, t) & 0x7f, 0) << c;
        continue;
      }
      EXPECT_EQ(double_to_fp8(v, t), c) << name(t) << " code " << c << " = " << v;
    }
  const DataType e4 = DataType::float8_e4m3, e5 = DataType::float8_e5m2;
  EXPECT_EQ(double_to_fp8(1.0, e4), 0x38);
  EXPECT_EQ(double_to_fp8(448.0, e4), 0x7e);
  EXPECT_EQ(double_to_fp8(1e6, e4), 0x7e);  // saturates
  EXPECT_EQ(double_to_fp8(-2.0, e4), 0xc0);
  EXPECT_EQ(double_to_fp8(std::ldexp(1.0, -9), e4), 0x01);  // smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_to_double(0x7f, e4)));
  EXPECT_EQ(double_to_fp8(1.0, e5), 0x3c);
  EXPECT_EQ(double_to_fp8(57344.0, e5), 0x7b);
  EXPECT_EQ(double_to_fp8(1e9, e5), 0x7b);
  EXPECT_EQ(double_to_fp8(std::ldexp(1.0, -16), e5), 0x01);
  EXPECT_TRUE(std::isinf(fp8_to_double(0x7c, e5)));
  // Between 16 and 18 in e4m3 (quantum 2): 17 ties to 16 (even mantissa), 19 to 20.
  EXPECT_EQ(round_to(e4, 17.0), 16.0);
  EXPECT_EQ(round_to(e4, 19.0), 20.0);
  EXPECT_EQ(round_to(e4, 17.5), 18.0);
  EXPECT_EQ(round_to(e5, 9.0), 8.0);  // e5m2: quantum 2 between 8 and 16
  EXPECT_EQ(round_to(e5, 11.0), 12.0);
}

TEST(Store, IntegersWrapLikeTwosComplement) {
  EXPECT_EQ(round_to(DataType::int8, 130), -126);
  EXPECT_EQ(round_to(DataType::uint8, 256 + 5), 5);
  EXPECT_EQ(round_to(DataType::uint8, -1), 255);
  EXPECT_EQ(round_to(DataType::int32, 7), 7);
  EXPECT_EQ(round_to(DataType::uint64, 12345), 12345);
  EXPECT_EQ(round_to(DataType::float32, 0.1), static_cast<double>(0.1f));
}

TEST(Store, EveryTypeRoundTripsSmallIntegers) {
  for (DataType t : all_datatypes()) {
    unsigned char buf[8 * 4];
    for (int i = 0; i < 4; ++i) store(t, buf, i, 10 + i);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(load(t, buf, i), 10 + i) << name(t);
  }
}

}  // namespace
}  // namespace perf
