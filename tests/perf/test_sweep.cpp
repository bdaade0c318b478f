#include <gtest/gtest.h>

#include "sweep.hpp"

namespace perf {
namespace {

TEST(Sweep, Factor) {
  EXPECT_EQ(size_sweep(8, 64, 0, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(8, 100, 0, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(1, 1 << 20, 0, 4).size(), 11u);
  EXPECT_EQ(size_sweep(8, 64ull << 20, 0, 2).size(), 24u);  // 8 B .. 64 MB
}

TEST(Sweep, StepBytes) {
  EXPECT_EQ(size_sweep(0, 10, 4, 1), (std::vector<uint64_t>{0, 4, 8}));
  EXPECT_EQ(size_sweep(1024, 4096, 1024, 1), (std::vector<uint64_t>{1024, 2048, 3072, 4096}));
}

TEST(Sweep, SingleSizeAndEdges) {
  EXPECT_EQ(size_sweep(32 << 20, 32 << 20, 1 << 20, 1), (std::vector<uint64_t>{32 << 20}));
  EXPECT_EQ(size_sweep(0, 64, 0, 2), (std::vector<uint64_t>{0}));  // zero never grows
  EXPECT_TRUE(size_sweep(16, 8, 1, 1).empty());
  const uint64_t top = ~0ull;
  EXPECT_EQ(size_sweep(top - 1, top, 0, 2).size(), 1u);  // no overflow wrap
}

}  // namespace
}  // namespace perf
