// The emulated backend's blocking rules (docs/device.md, "Blocking rules"): what blocks as
// it does on a GPU, so that what would hang a GPU hangs or fails in CI; and each of the
// hang hypotheses of PyTorch's DDP run on an H200 (docs/gpu.md), planted in a small
// program, caught here.
//
// A "held" stream is what a device call does to the user's stream: it waits for a flag that
// the call's worker raises when the call is over (core/stream_order).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "ground/device/emulated/backend.hpp"
#include "process_roles.hpp"
#include "strata/error.hpp"

namespace strata_test {

namespace {

using Clock = std::chrono::steady_clock;
using strata::device::Stream;
using strata::device::StreamFlags;
using strata::device::StreamsHeld;

double waited_s(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A private emulated backend whose context lock gives up after 0.3 s.
std::unique_ptr<Backend> quick_backend() {
  return strata::device::emulated::make_backend({.delay_us = 0, .cuda_rules = true, .lock_wait_s = 0.3});
}

// A stream held until release(): a wait_value on a pinned flag, as a device call's.
struct HeldStream {
  Backend& b;
  Stream s;
  uint64_t* flag;
  explicit HeldStream(Backend& backend) : b(backend) {
    s = b.execution().stream_create();
    flag = static_cast<uint64_t*>(b.memory().host_alloc(4096));
    *flag = 0;
    b.execution().wait_value(s, flag, 1);
  }
  void release() { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
  ~HeldStream() {
    release();
    b.execution().stream_destroy(s);
    b.memory().host_free(flag);
  }
};

// Releases `h` after `ms` on a thread of its own, as a call's worker would.
std::thread release_after(HeldStream& h, int ms) {
  return std::thread([&h, ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    h.release();
  });
}

TEST(BlockingRules, ACopyWithPageableMemoryWaitsForItsStreamAPinnedOneDoesNot) {
  if (!on_emulated()) GTEST_SKIP() << "the emulated backend's rules";
  auto b = quick_backend();
  auto& ex = b->execution();
  void* d = b->memory().alloc(4096);
  auto* pinned = static_cast<char*>(b->memory().host_alloc(4096));
  std::vector<char> pageable(4096, 'x');
  {
    HeldStream held(*b);
    Clock::time_point t = Clock::now();
    ex.copy(d, pinned, 4096, held.s);
    EXPECT_LT(waited_s(t), 0.1) << "a copy from pinned memory returns at once";
    std::thread worker = release_after(held, 300);
    t = Clock::now();
    ex.copy(pageable.data(), d, 4096, held.s);
    EXPECT_GE(waited_s(t), 0.25) << "a copy to pageable memory returns once its stream ran it";
    worker.join();
  }
  b->memory().host_free(pinned);
  b->memory().free(d);
}

TEST(BlockingRules, TheDefaultStreamSynchronisesWithBlockingStreamsOnly) {
  if (!on_emulated()) GTEST_SKIP() << "the emulated backend's rules";
  auto b = quick_backend();
  auto& ex = b->execution();
  auto* flags = static_cast<uint64_t*>(b->memory().host_alloc(4096));
  std::memset(flags, 0, 4096);
  Stream blocking = ex.stream_create(StreamFlags::blocking), independent = ex.stream_create();
  // The default stream is held; what a blocking stream queues after that waits, what a
  // non-blocking one queues does not.
  ex.wait_value(nullptr, &flags[0], 1);
  ex.write_value(blocking, &flags[1], 1);
  ex.write_value(independent, &flags[2], 1);
  ex.stream_synchronize(independent);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(__atomic_load_n(&flags[2], __ATOMIC_ACQUIRE), 1u);
  EXPECT_EQ(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE), 0u) << "a blocking stream ran ahead of the default stream";
  __atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
  ex.stream_synchronize(blocking);
  EXPECT_EQ(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE), 1u);
  // The other way: the default stream's task waits for a blocking stream's earlier work.
  ex.wait_value(blocking, &flags[3], 1);
  ex.write_value(nullptr, &flags[4], 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(__atomic_load_n(&flags[4], __ATOMIC_ACQUIRE), 0u) << "the default stream ran ahead of a blocking stream";
  __atomic_store_n(&flags[3], 1, __ATOMIC_RELEASE);
  ex.stream_synchronize(nullptr);
  EXPECT_EQ(__atomic_load_n(&flags[4], __ATOMIC_ACQUIRE), 1u);
  ex.stream_destroy(blocking);
  ex.stream_destroy(independent);
  b->memory().host_free(flags);
}

TEST(BlockingRules, ACallThatNeedsTheContextLockWaitsForABlockedHolderAndNamesIt) {
  if (!on_emulated()) GTEST_SKIP() << "the emulated backend's rules";
  auto b = quick_backend();
  void* d = b->memory().alloc(4096);
  std::vector<char> pageable(4096);
  HeldStream held(*b);
  std::string why;
  // Not a Strata worker: a thread of the program's, which simply waits for the lock.
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the copy below holds the lock by then
    try {
      b->execution().stream_create();
    } catch (const strata::SystemError& e) {
      why = e.what();
    }
    held.release();
  });
  b->execution().copy(pageable.data(), d, 4096, held.s);  // holds the lock until the stream gets there
  other.join();
  EXPECT_NE(why.find("stream_create"), std::string::npos) << why;
  EXPECT_NE(why.find("a copy with pageable host memory"), std::string::npos) << "the holder is named: " << why;
  EXPECT_NE(why.find("a GPU"), std::string::npos) << why;
  // Once nobody holds it, the same call goes through.
  b->execution().stream_destroy(b->execution().stream_create());
  b->memory().free(d);
}

// Foreign memory: a program's cudaMalloc, pointers inside it, its legacy handle.
TEST(BlockingRules, ForeignMemoryIsFoundBySubRangePointersAndSharedByLegacyHandles) {
  if (!on_emulated()) GTEST_SKIP() << "the CUDA backend opens no legacy handle of its own process";
  auto& mem = dev().memory();
  char* f = static_cast<char*>(dev().program().device_malloc(1 << 20));
  const strata::device::PointerInfo info = mem.query(f + 12345);
  EXPECT_EQ(info.origin, strata::device::Origin::foreign);
  EXPECT_EQ(info.kind, strata::MemoryKind::device);
  EXPECT_EQ(info.base, f);
  EXPECT_EQ(info.length, size_t{1} << 20);
  EXPECT_THROW(mem.export_handle(f + 4096), strata::InvalidArgument) << "only the allocation's start is exported";
  strata::device::IpcHandle h = mem.export_handle(f);
  EXPECT_EQ(h.type(), strata::device::IpcHandle::Type::legacy);
  std::vector<int> sent(1024);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<int>(i * 7 + 1);
  upload(f + 8192, sent.data(), 4096);
  char* mapped = static_cast<char*>(mem.import_handle(h));
  EXPECT_EQ(download<int>(mapped + 8192, sent.size()), sent) << "the import maps the same bytes";
  mem.unimport(mapped);
  EXPECT_THROW(dev().memory().free(f), strata::InvalidArgument) << "Strata's free refuses a program's memory";
  dev().program().device_free(f);
}

TEST(BlockingRules, CaptureIsWhatTheProgramBegan) {
  auto& ex = dev().execution();
  Stream s = ex.stream_create();
  EXPECT_FALSE(ex.stream_capturing(s));
  dev().program().begin_capture(s);
  EXPECT_TRUE(ex.stream_capturing(s));
  dev().program().end_capture(s);
  EXPECT_FALSE(ex.stream_capturing(s));
  ex.stream_destroy(s);
}

// ---- the hypotheses of the H200's DDP hang, planted ----

// Hypothesis 1: the user's thread blocks in a call that holds the context lock (a copy to
// pageable memory) and waits for the stream a device call holds, while the call's worker
// makes a driver call that needs the lock (the legacy IPC path of PyTorch's memory). On a
// worker (inside StreamsHeld) it is refused at once; made by a thread that is not marked
// as one (what a library without the refusal would be), it waits for the lock and gives up
// saying a GPU would hang.
TEST(Hypotheses, OneALockInversionWithTheUsersBlockedThreadIsCaught) {
  if (!on_emulated()) GTEST_SKIP() << "the emulated backend's rules";
  auto b = quick_backend();
  char* f = static_cast<char*>(b->program().device_malloc(1 << 20));
  strata::device::IpcHandle h = b->memory().export_handle(f);
  std::vector<char> pageable(4096);
  for (bool marked : {true, false}) {
    HeldStream held(*b);
    std::string why;
    Clock::time_point t;
    std::thread worker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      t = Clock::now();
      try {
        std::unique_ptr<StreamsHeld> scope(marked ? new StreamsHeld : nullptr);
        b->memory().import_handle(h);
      } catch (const strata::Error& e) {
        why = e.what();
      }
      held.release();  // the call ends (failed)
    });
    b->execution().copy(pageable.data(), f, 4096, held.s);
    worker.join();
    EXPECT_NE(why.find("cudaIpcOpenMemHandle"), std::string::npos) << why;
    if (marked) {
      EXPECT_NE(why.find("while the call holds its users' streams"), std::string::npos) << why;
      EXPECT_LT(waited_s(t), 0.25) << "refused at once on a worker";
    } else {
      EXPECT_NE(why.find("a GPU this call would wait for ever"), std::string::npos) << why;
    }
  }
  b->program().device_free(f);
}

// Hypothesis 2: an implicit synchronisation inside a held call: the worker makes a call
// that waits for the whole device (a free, a program's allocation, a kernel's first
// launch), which includes the stream its own call holds. On a worker it is refused at once;
// made without the refusal, it hangs, as on a GPU: the process is stopped by its deadline.
TEST(Hypotheses, TwoAnImplicitSynchronisationInsideAHeldCallIsCaught) {
  if (!on_emulated()) GTEST_SKIP() << "the emulated backend's rules";
  auto b = quick_backend();
  void* d = b->memory().alloc(4096);
  {
    HeldStream held(*b);
    StreamsHeld scope;
    EXPECT_THROW(b->memory().free(d), strata::InternalError);
    EXPECT_THROW(b->program().host_malloc(4096), strata::InternalError);
    EXPECT_THROW(b->program().device_malloc(4096), strata::InternalError);
    EXPECT_THROW(b->program().kernel_copy(d, d, 16, nullptr), strata::InternalError);
  }
  b->memory().free(d);
  // Unrefused: a hang (a child process, stopped at its deadline).
  const std::vector<ProcResult> r = run_all({role_spec("--implicit-sync-hang", {})}, 3);
  EXPECT_TRUE(r[0].killed_by_deadline) << "a device synchronisation inside a held call did not hang: " << r[0].describe()
                                       << "\n"
                                       << tail(r[0].out);
}

// Hypothesis 3: the worker waits for a stream that never reaches its call: it is named by
// the rank itself after its timeout (DeviceCalls.AStreamThatNeverReachesItsCallTimesOutAndIsReleased
// in test_comm.cpp); what its peers say of it meanwhile is the failure protocol's.

}  // namespace

// The role: a thread that holds a stream (as a call's worker) synchronises the device
// without the refusal; the synchronisation waits for that stream, which waits for the
// thread: exits only if it does not hang.
int implicit_sync_hang_role(int, char**) {
  auto& ex = dev().execution();
  auto* flag = static_cast<uint64_t*>(dev().memory().host_alloc(4096));
  *flag = 0;
  Stream user = ex.stream_create();
  ex.wait_value(user, flag, 1);
  void* d = dev().memory().alloc(4096);
  dev().memory().free(d);  // waits for every stream: `user` waits for this thread's flag
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  std::printf("implicit-sync: no hang\n");
  return 0;
}

}  // namespace strata_test
