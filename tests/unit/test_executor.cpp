// The host executor (src/core/executor.hpp) against serial computations, scratch memory
// (src/core/scratch.hpp), and the clear error for device memory where there is no device
// backend (the device executor and scratch are tested on one in tests/device).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include <unistd.h>

#include "core/executor.hpp"
#include "core/scratch.hpp"
#include "ground/device/backend.hpp"
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
  const Reduction how = Reduction::on_host(reduce_fn(DataType::float32, ReduceOp::avg), sizeof(float), nullptr, false, DataType::float32, ReduceOp::avg);
  ex->reduce(reinterpret_cast<char*>(dst.data()), reinterpret_cast<const char*>(src.data()), n, how);
  ex->finalize(reinterpret_cast<char*>(dst.data()), n, DataType::float32, ReduceOp::avg, 2);
  EXPECT_EQ(dst, want);
}

TEST(DeviceExecutor, WithoutADeviceBackendIsAClearError) {
  if (device::backend()) GTEST_SKIP() << "a device backend is loaded (STRATA_DEVICE): tests/device covers it";
  try {
    make_executor(MemoryKind::device);
    FAIL() << "no error";
  } catch (const InvalidUsage& e) {
    EXPECT_NE(std::string(e.what()).find("needs a device backend"), std::string::npos) << e.what();
  }
}

// Page-aligned, grown to the largest request and kept for smaller ones; every byte asked
// for is writable.
TEST(Scratch, HostBlocksArePageAlignedAndGrowToTheLargestRequest) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  Scratch s;
  EXPECT_EQ(s.get(MemoryKind::host, 0), nullptr);
  void* a = s.get(MemoryKind::host, 100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % page, 0u);
  std::memset(a, 1, 100);
  EXPECT_EQ(s.get(MemoryKind::host, 50), a);
  void* b = s.get(MemoryKind::host, 3 * page + 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % page, 0u);
  std::memset(b, 2, 3 * page + 1);
  EXPECT_EQ(s.get(MemoryKind::host, page), b);
}

TEST(Scratch, DeviceMemoryWithoutADeviceBackendIsAClearError) {
  if (device::backend()) GTEST_SKIP() << "a device backend is loaded (STRATA_DEVICE): tests/device covers it";
  Scratch s;
  try {
    s.get(MemoryKind::device, 64);
    FAIL() << "no error";
  } catch (const InvalidUsage& e) {
    EXPECT_NE(std::string(e.what()).find("scratch memory for a call on device memory needs a device backend"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata
