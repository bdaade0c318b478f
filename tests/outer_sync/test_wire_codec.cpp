// The outer synchronisation's wire formats (ground/wire_codec): sizes, exact values,
// rounding rules and error bounds, each against its definition written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ground/wire_codec.hpp"

using strata::WireFormat;

namespace {

std::vector<float> roundtrip(WireFormat f, const std::vector<float>& x) {
  std::vector<uint8_t> wire(strata::wire_bytes(f, x.size()));
  std::vector<float> y(x.size());
  strata::wire_encode(f, x.data(), x.size(), wire.data());
  strata::wire_decode(f, wire.data(), x.size(), y.data());
  return y;
}

// Blocks of 64 with magnitudes from 1e-6 to 1e3, normal, heavy-tailed, and all-equal.
std::vector<float> test_data(size_t blocks) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  std::student_t_distribution<float> heavy(2.0f);
  std::vector<float> x;
  for (size_t b = 0; b < blocks; ++b) {
    const float mag = std::pow(10.0f, -6.0f + 9.0f * static_cast<float>(b) / static_cast<float>(blocks));
    for (int i = 0; i < 64; ++i)
      x.push_back(mag * (b % 3 == 0 ? normal(gen) : b % 3 == 1 ? heavy(gen) : (i % 2 ? 1.0f : -1.0f)));
  }
  return x;
}

}  // namespace

TEST(WireCodec, BytesPerBlock) {
  EXPECT_EQ(strata::wire_bytes(WireFormat::fp32, 128), 512u);
  EXPECT_EQ(strata::wire_bytes(WireFormat::bf16, 128), 256u);
  EXPECT_EQ(strata::wire_bytes(WireFormat::int8, 128), 2u * (4 + 64));
  EXPECT_EQ(strata::wire_bytes(WireFormat::fp4, 128), 2u * (4 + 32));
}

TEST(WireCodec, Fp32IsExact) {
  std::vector<float> x = test_data(40);
  std::vector<float> y = roundtrip(WireFormat::fp32, x);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0);
}

// bf16 keeps 8 significant bits, rounded to nearest even: |error| <= |x|·2^-8, and a
// value with only 8 significant bits comes back exactly.
TEST(WireCodec, Bf16WithinHalfAnUlp) {
  std::vector<float> x = test_data(40);
  std::vector<float> y = roundtrip(WireFormat::bf16, x);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) / 256) << i;
  std::vector<float> exact(64);
  for (int i = 0; i < 64; ++i) exact[i] = static_cast<float>(i - 32) * 0.25f;  // <= 8 significant bits
  EXPECT_EQ(roundtrip(WireFormat::bf16, exact), exact);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  std::vector<float> tie(64, 1.0f + 1.0f / 256);
  EXPECT_EQ(roundtrip(WireFormat::bf16, tie)[0], 1.0f);
}

// int8: scale = block absmax / 127, codes round(x / scale): |error| <= absmax / 254; the
// block's largest element comes back exactly; multiples of the scale come back exactly.
TEST(WireCodec, Int8WithinHalfAStepOfTheBlockScale) {
  std::vector<float> x = test_data(40);
  std::vector<float> y = roundtrip(WireFormat::int8, x);
  for (size_t b = 0; b < x.size() / 64; ++b) {
    float absmax = 0;
    for (int i = 0; i < 64; ++i) absmax = std::max(absmax, std::fabs(x[b * 64 + i]));
    for (int i = 0; i < 64; ++i) {
      const size_t k = b * 64 + i;
      ASSERT_LE(std::fabs(y[k] - x[k]), absmax / 254 * (1 + 1e-6f)) << "block " << b << " element " << i;
    }
  }
  std::vector<float> steps(64);
  for (int i = 0; i < 64; ++i) steps[i] = static_cast<float>(2 * i - 63) * 0.5f;  // absmax 31.5 = 127 steps of 31.5/127
  std::vector<float> back = roundtrip(WireFormat::int8, steps);
  EXPECT_EQ(back[0], -31.5f);
  EXPECT_EQ(back[63], 31.5f);
}

// fp4 (e2m1): magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} times absmax/6. With absmax 6 the
// grid is exact, and midpoints go to the even code: .25->0, .75->1, 1.25->1, 1.75->2,
// 2.5->2, 3.5->4, 5->4.
TEST(WireCodec, Fp4GridAndTiesToEven) {
  const std::vector<float> grid = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::vector<float> x(64, 0.0f);
  for (size_t i = 0; i < grid.size(); ++i) {
    x[i] = grid[i];
    x[8 + i] = -grid[i];
  }
  const std::vector<std::pair<float, float>> ties = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1}, {1.75f, 2},
                                                     {2.5f, 2},  {3.5f, 4},  {5.0f, 4}};
  for (size_t i = 0; i < ties.size(); ++i) {
    x[16 + i] = ties[i].first;
    x[24 + i] = -ties[i].first;
  }
  x[40] = 0.26f;  // just above a midpoint: up
  x[41] = 4.9f;   // just below one: down
  std::vector<float> y = roundtrip(WireFormat::fp4, x);
  for (size_t i = 0; i < grid.size(); ++i) {
    EXPECT_EQ(y[i], grid[i]);
    EXPECT_EQ(y[8 + i], -grid[i]);
  }
  for (size_t i = 0; i < ties.size(); ++i) {
    EXPECT_EQ(y[16 + i], ties[i].second) << ties[i].first;
    EXPECT_EQ(y[24 + i], -ties[i].second) << -ties[i].first;
  }
  EXPECT_EQ(y[40], 0.5f);
  EXPECT_EQ(y[41], 4.0f);
}

// |error| <= absmax/6 (half the widest gap, 4..6, in units of absmax/6).
TEST(WireCodec, Fp4WithinItsBound) {
  std::vector<float> x = test_data(40);
  std::vector<float> y = roundtrip(WireFormat::fp4, x);
  double worst = 0;
  for (size_t b = 0; b < x.size() / 64; ++b) {
    float absmax = 0;
    for (int i = 0; i < 64; ++i) absmax = std::max(absmax, std::fabs(x[b * 64 + i]));
    for (int i = 0; i < 64; ++i) {
      const size_t k = b * 64 + i;
      const double e = std::fabs(y[k] - x[k]);
      worst = std::max(worst, e / (absmax / 6));
      ASSERT_LE(e, absmax / 6 * (1 + 1e-6f)) << "block " << b << " element " << i;
    }
  }
  EXPECT_GT(worst, 0.5);  // the data reaches the bound's scale: the check is not vacuous
}

// A block with a non-finite value decodes as NaN (scaled formats); zeros stay zeros.
TEST(WireCodec, NonFiniteAndZeroBlocks) {
  for (WireFormat f : {WireFormat::int8, WireFormat::fp4}) {
    std::vector<float> x(128, 0.0f);
    x[3] = INFINITY;
    x[70] = 1.0f;
    std::vector<float> y = roundtrip(f, x);
    for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << strata::name(f) << " " << i;
    for (int i = 64; i < 128; ++i) EXPECT_EQ(y[i], i == 70 ? 1.0f : 0.0f) << strata::name(f) << " " << i;
  }
}
