// Device memory: allocation, the pointer query, the public API (strata::alloc,
// strata::device::*, strataMemAlloc), what the emulated backend promises (host code cannot
// touch device memory), and bad input: a pointer that is not ours, a range past an
// allocation's end, no backend, STRATA_DEVICE=cuda without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "device_test.hpp"
#include "process_roles.hpp"
#include "strata.h"
#include "strata/device.hpp"
#include "strata/error.hpp"

namespace strata_test {
namespace {

using strata::InvalidArgument;
using strata::MemoryKind;
using strata::DataType;
using strata::ReduceOp;
using strata::device::Origin;

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Memory, QueryKnowsEveryAllocationAndNothingElse) {
  auto& mem = dev().memory();
  void* d = mem.alloc(1000);
  void* h = mem.host_alloc(1000);
  int on_stack = 0;
  auto di = mem.query(static_cast<char*>(d) + 999);
  EXPECT_EQ(di.kind, MemoryKind::device);
  EXPECT_EQ(di.origin, Origin::allocated);
  EXPECT_EQ(di.base, d);
  EXPECT_GE(di.length, 1000u);
  auto hi = mem.query(h);
  EXPECT_EQ(hi.kind, MemoryKind::host);
  EXPECT_EQ(hi.origin, Origin::allocated);
  EXPECT_EQ(hi.base, h);
  auto si = mem.query(&on_stack);
  EXPECT_EQ(si.kind, MemoryKind::host);
  EXPECT_EQ(si.origin, Origin::unknown);
  EXPECT_EQ(si.id, 0u);
  EXPECT_NE(di.id, hi.id);
  EXPECT_EQ(mem.query(static_cast<char*>(d) + di.length).base == d, false) << "one past the end is not the allocation";
  mem.free(d);
  mem.host_free(h);
  EXPECT_EQ(mem.alloc(0), nullptr);
  mem.free(nullptr);
}

TEST(Memory, AllocationIdsAreNeverReused) {
  auto& mem = dev().memory();
  std::set<uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    void* d = mem.alloc(4096);  // the same address comes back often; its id must not
    EXPECT_TRUE(ids.insert(mem.query(d).id).second) << "id reused at allocation " << i;
    mem.free(d);
  }
}

TEST(Memory, PinnedHostMemoryIsReadableByHostAndTasks) {
  auto* h = static_cast<uint32_t*>(dev().memory().host_alloc(4096));
  for (int i = 0; i < 1024; ++i) h[i] = i * 3u;
  DeviceBuffer d(4096);
  upload(d.get(), h, 4096);
  auto back = download<uint32_t>(d.get(), 1024);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(back[i], i * 3u);
  dev().memory().host_free(h);
}

// The host's touch, in the death test's child: SIGSEGV's default action restored behind the
// sanitizers' backs (the raw system call), so the child dies of the signal itself instead
// of writing a sanitizer report that tools/sanitize would count as a failure; no core file.
void touch_and_die(void* p, bool write) {
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } dfl{};  // the kernel's struct sigaction, SIG_DFL
  syscall(SYS_rt_sigaction, SIGSEGV, &dfl, nullptr, sizeof dfl.mask);
  if (write)
    *static_cast<volatile char*>(p) = 1;
  else
    (void)*static_cast<volatile char*>(p);
  std::_Exit(0);  // survived: the test fails
}

// What makes the emulation faithful: host code touching device memory dies, as on a GPU.
TEST(MemoryDeathTest, AHostReadOrWriteOfDeviceMemoryCrashes) {
  if (!on_emulated()) GTEST_SKIP() << "checked on the emulated backend";
  EXPECT_EXIT(touch_and_die(dev().memory().alloc(64), false), ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(touch_and_die(dev().memory().alloc(64), true), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(Memory, FreeRefusesWhatItDidNotAllocate) {
  auto& mem = dev().memory();
  int on_stack = 0;
  void* d = mem.alloc(4096);
  void* h = mem.host_alloc(4096);
  EXPECT_NE(error_of<InvalidArgument>([&] { mem.free(&on_stack); }).find("not memory this backend allocated"), std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { mem.free(static_cast<char*>(d) + 8); }).find("not its start"), std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { mem.free(h); }).find("not device memory"), std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { mem.host_free(d); }).find("not host memory"), std::string::npos);
  mem.free(d);
  EXPECT_NE(error_of<InvalidArgument>([&] { mem.free(d); }).find("not memory this backend allocated"), std::string::npos)
      << "a double free";
  mem.host_free(h);
}

TEST(Memory, TasksRefuseRangesPastAnAllocationAndBadArguments) {
  auto& ex = dev().execution();
  DeviceBuffer d(4096);  // whole pages on both backends
  const size_t len = dev().memory().query(d.get()).length;
  std::vector<char> host(len + 1);
  EXPECT_NE(error_of<InvalidArgument>([&] { ex.copy(host.data(), d.get(), len + 1, nullptr); }).find("past the end"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { ex.memset(d.bytes() + 1, 0, len, nullptr); }).find("past the end"),
            std::string::npos);
  const void* srcs[strata::device::kMaxReduceSources + 1] = {};
  for (auto& s : srcs) s = d.get();
  EXPECT_NE(error_of<InvalidArgument>([&] { ex.reduce(d.get(), srcs, 0, 1, DataType::float32, ReduceOp::sum, nullptr); })
                .find("0 sources"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              ex.reduce(d.get(), srcs, strata::device::kMaxReduceSources + 1, 1, DataType::float32, ReduceOp::sum, nullptr);
            }).find("sources"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              ex.reduce(d.get(), srcs, 2, 1, static_cast<DataType>(42), ReduceOp::sum, nullptr);
            }).find("data type"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { ex.finalize(d.get(), 1, DataType::float32, ReduceOp::avg, 0, nullptr); })
                .find("nranks"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              ex.write_value(nullptr, reinterpret_cast<uint64_t*>(d.bytes() + 4), 1);
            }).find("aligned"),
            std::string::npos);
  if (on_emulated()) {
    int not_a_stream = 0;
    EXPECT_NE(error_of<InvalidArgument>([&] { ex.stream_synchronize(&not_a_stream); }).find("not a stream"),
              std::string::npos);
  }
  ex.stream_synchronize(nullptr);
}

TEST(PublicApi, AllocCopyAndFreeThroughStrataDevice) {
  namespace sd = strata::device;
  EXPECT_STREQ(sd::backend_name(), dev().name());
  EXPECT_TRUE(sd::available());
  EXPECT_EQ(sd::device_name(), dev().device_name());
  void* d = strata::alloc(1 << 20);
  void* h = strata::alloc(1 << 20, MemoryKind::host);
  EXPECT_EQ(sd::kind_of(d), MemoryKind::device);
  EXPECT_EQ(sd::kind_of(h), MemoryKind::host);
  sd::Stream s = sd::stream_create();
  std::vector<uint8_t> in(1 << 20), out(1 << 20, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i ^ (i >> 8));
  sd::memcpy_async(d, in.data(), in.size(), s);
  sd::memset_async(d, 0x11, 100, s);
  sd::memcpy_async(h, d, in.size(), s);
  int called = 0;
  sd::launch_host_func(s, [](void* p) { ++*static_cast<int*>(p); }, &called);
  sd::stream_synchronize(s);
  EXPECT_EQ(called, 1);
  std::memcpy(out.data(), h, out.size());
  for (size_t i = 0; i < 100; ++i) in[i] = 0x11;
  EXPECT_EQ(out, in);
  sd::stream_destroy(s);
  strata::free(d);
  strata::free(h);
  strata::free(nullptr);
  int on_stack;
  EXPECT_THROW(strata::free(&on_stack), InvalidArgument);
}

TEST(PublicApi, CMemAllocAndFree) {
  void* d = nullptr;
  ASSERT_EQ(strataMemAlloc(&d, 4096), strataSuccess) << strataGetLastError();
  EXPECT_EQ(strata::device::kind_of(d), MemoryKind::device);
  EXPECT_EQ(strataMemFree(d), strataSuccess);
  int on_stack;
  EXPECT_EQ(strataMemFree(&on_stack), strataInvalidArgument);
  EXPECT_NE(std::string(strataGetLastError()).find("not memory this backend allocated"), std::string::npos)
      << strataGetLastError();
  EXPECT_EQ(strataMemAlloc(nullptr, 16), strataInvalidArgument);
  EXPECT_EQ(strataMemFree(nullptr), strataSuccess);
}

// The other side of NoBackendIsAClearError: a process under STRATA_DEVICE=none.
int no_backend_checks() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) std::fprintf(stderr, "FAILED: %s\n", what.c_str()), ++failures;
  };
  expect(!strata::device::available(), "available() is false");
  expect(std::string(strata::device::backend_name()) == "none", "backend_name() is none");
  int on_stack = 0;
  expect(strata::device::kind_of(&on_stack) == MemoryKind::host, "kind_of is host");
  const std::string why = error_of<strata::InvalidUsage>([] { strata::alloc(16); });
  expect(why.find("STRATA_DEVICE=none: strata::alloc of device memory needs a device backend") != std::string::npos,
         "strata::alloc names the setting: " + why);
  expect(error_of<strata::InvalidUsage>([] { strata::device::stream_create(); }).find("STRATA_DEVICE=none") != std::string::npos,
         "stream_create names the setting");
  void* d = nullptr;
  expect(strataMemAlloc(&d, 16) == strataInvalidUsage && d == nullptr, "strataMemAlloc is strataInvalidUsage");
  void* h = strata::alloc(100, MemoryKind::host);  // host memory needs no backend
  expect(h != nullptr, "host memory without a backend");
  if (h) static_cast<char*>(h)[99] = 1;
  strata::free(h);
  expect(error_of<InvalidArgument>([&] { strata::free(&on_stack); }).find("not memory this backend allocated") != std::string::npos,
         "strata::free of a stack address");
  return failures;
}

}  // namespace

int no_backend_role(int, char**) {
  const int failures = no_backend_checks();
  std::printf("no-backend checks: %d failed\n", failures);
  return failures ? 1 : 0;
}

namespace {

TEST(Backends, NoBackendIsAClearError) {
  Process p = start_role("--no-backend", {}, {{"STRATA_DEVICE", "none"}});
  ProcResult r = p.finish(60);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << r.out;
}

bool nvidia_driver_here() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr; }

TEST(Backends, CudaWithoutAGpuSaysWhy) {
  if (nvidia_driver_here()) GTEST_SKIP() << "an NVIDIA driver is here";
  const std::string why = error_of<strata::SystemError>([] { strata::device::make_backend("cuda"); });
  EXPECT_EQ(why.rfind("cuda backend: ", 0), 0u) << why;
  EXPECT_TRUE(why.find("no NVIDIA driver") != std::string::npos || why.find("built without") != std::string::npos) << why;
  EXPECT_EQ(strata::device::make_backend("auto"), nullptr) << "auto without a driver is no backend";
  EXPECT_NE(error_of<InvalidArgument>([] { strata::device::make_backend("opencl"); }).find("auto, cuda, emulated, none"),
            std::string::npos);
}

}  // namespace
}  // namespace strata_test
