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
