// The communicator on device buffers, what one rank can show without a peer link: the
// device executor and scratch, bad buffers refused with messages naming them, and the
// stream order's failure paths (a stream that never reaches its call, abort, destroy, a
// group on two streams). tests/collectives' --device mode checks the results of every
// collective; tests/failure the killed and stopped peers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/executor.hpp"
#include "core/scratch.hpp"
#include "device_test.hpp"
#include "strata.h"
#include "strata/strata.hpp"

namespace strata_test {
namespace {

using namespace strata;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Comm one_rank(double timeout_s = 0) {
  CommOptions o;
  o.timeout_s = timeout_s;
  return Comm::init_rank(1, get_unique_id(), 0, o);
}

// What an error says, or "" when `f` does not throw one of class E.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Whether the work queued on `s` so far finishes within `limit_s` (a held stream fails the
// test instead of hanging it).
bool drains_within(device::Stream s, double limit_s) {
  device::Execution& x = dev().execution();
  device::Event e = x.event_create();
  x.event_record(e, s);
  const auto t0 = Clock::now();
  bool done = false;
  while (!(done = x.event_query(e)) && seconds_since(t0) < limit_s) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (done) x.event_destroy(e);  // else the stream still holds it: kept
  return done;
}

// Holds a stream at a wait_value until release(): the user's own work before a call.
class StreamGate {
 public:
  explicit StreamGate(device::Stream s) { dev().execution().wait_value(s, flag_.data(), 1); }
  ~StreamGate() { release(); }
  void release() { __atomic_store_n(flag_.data(), 1, __ATOMIC_RELEASE); }

 private:
  PinnedBuffer<uint64_t> flag_{1, 0};
};

TEST(DeviceExecutor, CopiesOverlappingRangesAsMemmove) {
  auto ex = make_executor(MemoryKind::device);
  const size_t n = 4096;
  std::vector<char> pattern(n);
  for (size_t i = 0; i < n; ++i) pattern[i] = static_cast<char>(i * 7 + 3);
  DeviceBuffer d(n);
  for (size_t gap : {size_t(1), size_t(7), size_t(64), size_t(1000), size_t(3000)})
    for (bool up : {true, false}) {
      const size_t len = n - gap;
      std::vector<char> want = pattern;
      char* dst = up ? want.data() + gap : want.data();
      std::memmove(dst, up ? want.data() : want.data() + gap, len);
      upload(d.get(), pattern.data(), n);
      ex->copy(up ? d.bytes() + gap : d.bytes(), up ? d.bytes() : d.bytes() + gap, len);
      ex->settle();
      EXPECT_EQ(download<char>(d.get(), n), want) << "gap " << gap << (up ? " upwards" : " downwards");
    }
}

TEST(DeviceExecutor, ReducesAndFinalizesLikeASerialLoop) {
  auto ex = make_executor(MemoryKind::device);
  const size_t n = 1001;
  std::vector<float> a(n), b(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 17);
    b[i] = static_cast<float>(3 * i % 11) + 0.5f;
    want[i] = (a[i] + b[i]) / 2.0f;
  }
  DeviceBuffer da(n * 4), db(n * 4);
  upload(da.get(), a.data(), n * 4);
  upload(db.get(), b.data(), n * 4);
  const Reduction how = Reduction::on_device(DataType::float32, ReduceOp::avg, sizeof(float), nullptr, false);
  ex->reduce(da.bytes(), db.bytes(), n, how);
  ex->finalize(da.bytes(), n, DataType::float32, ReduceOp::avg, 2);
  ex->settle();
  EXPECT_EQ(download<float>(da.get(), n), want);
}

TEST(DeviceScratch, IsDeviceMemoryGrownToTheLargestRequest) {
  Scratch s;
  void* a = s.get(MemoryKind::device, 100);
  ASSERT_NE(a, nullptr);
  const device::PointerInfo info = dev().memory().query(a);
  EXPECT_EQ(info.kind, MemoryKind::device);
  EXPECT_GE(info.length, 100u);
  EXPECT_EQ(s.get(MemoryKind::device, 50), a);
  void* b = s.get(MemoryKind::device, 1 << 20);
  EXPECT_EQ(dev().memory().query(b).kind, MemoryKind::device);
  EXPECT_GE(dev().memory().query(b).length, size_t(1) << 20);
}

// Host memory, a freed device buffer and mixed kinds are InvalidArgument naming the buffer
// and what it is, before anything is queued; a one-rank communicator stays usable.
TEST(DeviceCalls, RefuseHostFreedAndMixedBuffersNamingThem) {
  Comm c = one_rank();
  const size_t n = 64;
  DeviceBuffer d(n * 4), e(n * 4);
  std::vector<float> host(n, 1.0f);
  PinnedBuffer<float> pinned(n, 1.0f);
  device::Stream s = dev().execution().stream_create();
  const auto F = DataType::float32;
  const auto sum = ReduceOp::sum;

  std::string m = message_of<InvalidArgument>([&] { c.all_reduce(host.data(), host.data(), n, F, sum, s); });
  EXPECT_TRUE(has(m, "send buffer") && has(m, "is host memory") && has(m, "takes device memory only")) << m;
  m = message_of<InvalidArgument>([&] { c.all_reduce(pinned.data(), e.get(), n, F, sum, s); });
  EXPECT_TRUE(has(m, "send buffer") && has(m, "recv buffer") && has(m, "is device memory") &&
              has(m, "must all be host or all device memory"))
      << m;
  m = message_of<InvalidArgument>([&] { c.all_reduce(d.get(), host.data(), n, F, sum); });
  EXPECT_TRUE(has(m, "must all be host or all device memory")) << "without a stream too: " << m;
  m = message_of<InvalidArgument>([&] { c.send(host.data(), n, F, 0, s); });
  EXPECT_TRUE(has(m, "send: buffer") && has(m, "takes device memory only")) << m;
  {
    void* freed = dev().memory().alloc(n * 4);
    dev().memory().free(freed);
    m = message_of<InvalidArgument>([&] { c.broadcast(freed, e.get(), n, F, 0, s); });
    EXPECT_TRUE(has(m, "send buffer " + device::address_text(freed)) && has(m, "already freed")) << m;
  }
  // A group of both kinds: refused at the call that mixes them, and at group_end.
  c.group_start();
  c.send(d.get(), n, F, 0, s);
  m = message_of<InvalidArgument>([&] { c.recv(host.data(), n, F, 0); });
  EXPECT_TRUE(has(m, "a group's buffers must all be host or all device memory")) << m;
  m = message_of<InvalidArgument>([&] { c.group_end(); });
  EXPECT_TRUE(has(m, "group_end: the group holds a refused call")) << m;

  // C: the same verdict as a code and the last error.
  strataComm_t cc = nullptr;
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  ASSERT_EQ(strataCommInitRank(&cc, 1, id, 0), strataSuccess);
  EXPECT_EQ(strataAllReduceOnStream(host.data(), host.data(), n, strataFloat32, strataSum, cc, s), strataInvalidArgument);
  EXPECT_TRUE(has(strataGetLastError(), "takes device memory only")) << strataGetLastError();
  EXPECT_EQ(strataAllReduceOnStream(d.get(), e.get(), n, strataFloat32, strataSum, cc, s), strataSuccess);
  strataResult_t async = strataInternalError;
  EXPECT_EQ(strataCommGetAsyncError(cc, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess);
  EXPECT_EQ(strataCommDestroy(cc), strataSuccess);

  // Still usable: a right call goes through, and its result is right.
  upload(d.get(), host.data(), n * 4, s);
  Request r = c.all_reduce(d.get(), e.get(), n, F, sum, s);
  EXPECT_EQ(download<float>(e.get(), n, s), host);
  r.wait();
  c.destroy();
  dev().execution().stream_destroy(s);
}

// The user's stream holds work that never ends: the call fails after the timeout naming
// this rank, the error is kept (the next call throws it, async_error() and C report it),
// and the stream is not held by the call once its own work is over.
TEST(DeviceCalls, AStreamThatNeverReachesItsCallTimesOutAndIsReleased) {
  Comm c = one_rank(0.5);
  DeviceBuffer d(4096);
  device::Stream s = dev().execution().stream_create();
  StreamGate gate(s);
  const auto t0 = Clock::now();
  Request r = c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s);
  EXPECT_LT(seconds_since(t0), 0.4) << "a call on a stream returns at once";
  const std::string m = message_of<TimeoutError>([&] { r.wait(); });
  const double waited = seconds_since(t0);
  EXPECT_TRUE(has(m, "rank 0") && has(m, "did not reach it within")) << m;
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 5.0);
  ASSERT_TRUE(c.async_error());
  EXPECT_EQ(message_of<TimeoutError>([&] { std::rethrow_exception(c.async_error()); }), m);
  EXPECT_EQ(message_of<TimeoutError>([&] { c.barrier(); }), m) << "the next call throws the kept error";
  gate.release();
  EXPECT_TRUE(drains_within(s, 2.0)) << "the failed call still holds its stream";
  c.destroy();
  dev().execution().stream_destroy(s);
}

// Rank 1's stream holds work that does not end; rank 0's call times out waiting for it. Rank
// 1's worker, waiting for its stream, still answers rank 0's liveness probe, saying what it
// waits for: rank 0's error names rank 1 and that, instead of taking it for stopped.
TEST(DeviceCalls, ARankWaitingForItsStreamSaysSoToItsPeers) {
  const UniqueId id = get_unique_id();
  std::string error0, error1;
  std::thread other([&] {
    CommOptions o;
    o.timeout_s = 30;  // rank 0 times out first
    Comm c = Comm::init_rank(2, id, 1, o);
    DeviceBuffer d(4096);
    device::Stream s = dev().execution().stream_create();
    {
      StreamGate gate(s);
      Request r = c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s);
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      gate.release();
      error1 = message_of<PeerError>([&] { r.wait(); });
    }
    EXPECT_TRUE(drains_within(s, 5.0));
    c.destroy();
    dev().execution().stream_destroy(s);
  });
  {
    CommOptions o;
    o.timeout_s = 1;
    Comm c = Comm::init_rank(2, id, 0, o);
    DeviceBuffer d(4096);
    device::Stream s = dev().execution().stream_create();
    error0 = message_of<TimeoutError>([&] { c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s).wait(); });
    c.destroy();
    dev().execution().stream_destroy(s);
  }
  other.join();
  EXPECT_TRUE(has(error0, "rank 1 answered that it is in device call 1, waiting") &&
              has(error0, "for its stream to reach the call"))
      << error0;
  EXPECT_TRUE(has(error1, "rank 0")) << error1;
}

// A stream being captured into a CUDA graph: the call is refused at once naming capture
// (a graph would not replay the worker's flag), nothing is queued on the stream, and the
// communicator goes on. On CUDA the capture is cudaStreamBeginCapture's.
TEST(DeviceCalls, ACallOnAStreamBeingCapturedIsRefusedNamingCapture) {
  Comm c = one_rank(5);
  DeviceBuffer d(4096);
  device::Stream s = dev().execution().stream_create();
  dev().program().begin_capture(s);
  const std::string m = message_of<InvalidUsage>([&] { c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s); });
  dev().program().end_capture(s);
  EXPECT_TRUE(has(m, "captured into a CUDA graph")) << m;
  EXPECT_TRUE(drains_within(s, 2.0)) << "the refused call left something on the stream";
  c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s).wait();
  EXPECT_FALSE(c.async_error());
  c.destroy();
  dev().execution().stream_destroy(s);
}

// Calls queued behind a held stream never run when the communicator is aborted, and the
// stream is not left waiting for them.
TEST(DeviceCalls, AbortReleasesTheStreamsOfCallsThatNeverRan) {
  Comm c = one_rank();
  DeviceBuffer d(4096);
  device::Stream s = dev().execution().stream_create();
  StreamGate gate(s);
  std::vector<Request> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(c.all_reduce(d.get(), d.get(), 1024, DataType::float32, ReduceOp::sum, s));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = Clock::now();
  c.abort();
  EXPECT_LT(seconds_since(t0), 2.0) << "abort waits for the call waiting on its stream";
  for (Request& r : rs) EXPECT_TRUE(has(message_of<InvalidUsage>([&] { r.wait(); }), "aborted"));
  gate.release();
  ASSERT_TRUE(drains_within(s, 2.0)) << "the calls that never ran still hold their stream";
  dev().execution().stream_destroy(s);
}

// destroy() finishes what was queued: the stream gets there after a while, the call runs,
// its result is there.
TEST(DeviceCalls, DestroyRunsTheCallsQueuedBeforeIt) {
  Comm c = one_rank();
  const size_t n = 1001;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  DeviceBuffer d(n * 4), e(n * 4);
  device::Stream s = dev().execution().stream_create();
  upload(d.get(), x.data(), n * 4, s);
  StreamGate gate(s);
  c.all_reduce(d.get(), e.get(), n, DataType::float32, ReduceOp::sum, s);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.release();
  });
  c.destroy();
  opener.join();
  EXPECT_EQ(download<float>(e.get(), n, s), x);
  dev().execution().stream_destroy(s);
}

// A group's sends on one stream and receives on another: it waits for both streams to get
// there, and both wait for it.
TEST(DeviceCalls, AGroupOnTwoStreamsIsOrderedOnBoth) {
  Comm c = one_rank();
  const size_t n = 4097;
  std::vector<int32_t> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<int32_t>(i * 3 - 5);
  PinnedBuffer<int32_t> in(n), out(n, -1);
  std::copy(x.begin(), x.end(), in.data());
  DeviceBuffer d(n * 4), e(n * 4);
  device::Stream a = dev().execution().stream_create(), b = dev().execution().stream_create();
  for (int round = 0; round < 3; ++round) {
    dev().execution().memset(e.get(), 0, n * 4, b);
    dev().execution().copy(d.get(), in.data(), n * 4, a);  // just before, on the sending stream
    c.group_start();
    c.send(d.get(), n, DataType::int32, 0, a);
    c.recv(e.get(), n, DataType::int32, 0, b);
    c.group_end_async();
    dev().execution().copy(out.data(), e.get(), n * 4, b);  // just after, on the receiving stream
    dev().execution().stream_synchronize(b);
    EXPECT_EQ(out.vector(), x) << "round " << round;
  }
  c.destroy();
  dev().execution().stream_destroy(a);
  dev().execution().stream_destroy(b);
}

}  // namespace
}  // namespace strata_test
