// The host executor (src/core/executor.hpp) against serial computations, and the clear
// error for memory kinds that have no executor yet.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/executor.hpp"
#include "ground/reduce.hpp"
#include "strata/error.hpp"

namespace strata {
namespace {

TEST(HostExecutor, CopyMovesOverlappingBytes) {
  auto ex = make_executor(MemoryKind::host);
  std::vector<char> buf(64), want(64);
  std::iota(buf.begin(), buf.end(), 0);
  std::iota(want.begin(), want.end(), 0);
  for (int i = 0; i < 40; ++i) want[8 + i] = static_cast<char>(i);  // bytes 0..39 moved 8 up
  ex->copy(buf.data() + 8, buf.data(), 40);
  ex->settle();
  EXPECT_EQ(buf, want);
}

TEST(HostExecutor, ReducesAndFinalizesLikeASerialLoop) {
  auto ex = make_executor(MemoryKind::host);
  const size_t n = 1001;
  std::vector<float> dst(n), src(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    dst[i] = static_cast<float>(i % 17);
    src[i] = static_cast<float>(3 * i % 11) + 0.5f;
    want[i] = (dst[i] + src[i]) / 2.0f;
  }
  Reduction how{reduce_fn(DataType::float32, ReduceOp::avg), sizeof(float), nullptr, false, DataType::float32, ReduceOp::avg};
  ex->reduce(reinterpret_cast<char*>(dst.data()), reinterpret_cast<const char*>(src.data()), n, how);
  ex->finalize(reinterpret_cast<char*>(dst.data()), n, DataType::float32, ReduceOp::avg, 2);
  EXPECT_EQ(dst, want);
}

TEST(HostExecutor, DeviceMemoryIsAClearErrorUntilTheDeviceLayerIsWired) {
  try {
    make_executor(MemoryKind::device);
    FAIL() << "no error";
  } catch (const InvalidUsage& e) {
    EXPECT_NE(std::string(e.what()).find("device layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
