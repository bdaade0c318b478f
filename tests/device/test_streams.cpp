// Streams and events: order within a stream, waits across streams, host callbacks, the
// stream memory operations (write_value / wait_value), and the planted bug the emulated
// backend's delay mode exists for: a reader that does not wait for a writer on another
// stream reads stale data in some trial, and never when it waits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "ground/device/emulated/backend.hpp"
#include "strata/error.hpp"

namespace strata_test {
namespace {

using strata::device::Event;
using strata::device::Execution;
using strata::device::Stream;

// A chain of copies on one stream through three device buffers: each reads what the one
// before wrote, so a task run out of order leaves stale bytes.
TEST(Streams, TasksOnOneStreamRunInOrder) {
  auto& ex = dev().execution();
  const size_t n = 1 << 16;
  DeviceBuffer a(n), b(n), c(n);
  Stream s = ex.stream_create();
  std::vector<uint8_t> want(n), zero(n, 0);
  for (int round = 1; round <= 20; ++round) {
    for (size_t i = 0; i < n; ++i) want[i] = static_cast<uint8_t>(i * 7 + round);
    ex.memset(c.get(), 0, n, s);
    ex.copy(a.get(), want.data(), n, s);
    ex.copy(b.get(), a.get(), n, s);
    ex.copy(c.get(), b.get(), n, s);
    std::vector<uint8_t> got(n);
    ex.copy(got.data(), c.get(), n, s);
    ex.stream_synchronize(s);
    ASSERT_EQ(got, want) << "round " << round;
  }
  ex.stream_destroy(s);
}

TEST(Streams, HostCallbacksRunInStreamOrderAfterTheWorkBeforeThem) {
  auto& ex = dev().execution();
  struct Log {
    std::vector<int> order;
    std::vector<uint8_t> seen;
  } log;
  struct Call {
    Log* log;
    int id;
    const uint8_t* host;
  };
  DeviceBuffer d(64);
  Stream s = ex.stream_create();
  std::vector<uint8_t> pattern(64, 0x5a), back(64, 0);
  std::vector<Call> calls;
  for (int i = 0; i < 50; ++i) calls.push_back({&log, i, back.data()});
  ex.copy(d.get(), pattern.data(), 64, s);
  ex.copy(back.data(), d.get(), 64, s);
  for (Call& c : calls)
    ex.host_callback(s, [](void* p) {
      auto* c = static_cast<Call*>(p);
      c->log->order.push_back(c->id);
      c->log->seen.push_back(c->host[63]);
    }, &c);
  ex.stream_synchronize(s);
  ex.stream_destroy(s);
  ASSERT_EQ(log.order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(log.order[i], i);
  for (uint8_t v : log.seen) EXPECT_EQ(v, 0x5a) << "a callback ran before the copy queued ahead of it";
}

// The writer stream is held back (it waits for a flag the test sets later); the reader
// waits for the writer's event, so it must see the written bytes however long that takes.
TEST(Streams, AStreamWaitsForAnEventOfAnother) {
  auto& ex = dev().execution();
  PinnedBuffer<uint64_t> flag(8, 0);
  const size_t n = 4096;
  DeviceBuffer d(n);
  PinnedBuffer<uint8_t> zero(n, 0), ones(n, 1), got(n, 7);
  upload(d.get(), zero.data(), n);
  Stream writer = ex.stream_create(), reader = ex.stream_create();
  Event e = ex.event_create();
  EXPECT_TRUE(ex.event_query(e)) << "an event never recorded counts as done";
  ex.wait_value(writer, flag.data(), 1);
  ex.copy(d.get(), ones.data(), n, writer);
  ex.event_record(e, writer);
  ex.stream_wait(reader, e);
  ex.copy(got.data(), d.get(), n, reader);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(ex.event_query(e)) << "the writer is still waiting for its flag";
  __atomic_store_n(flag.data(), 1, __ATOMIC_RELEASE);
  ex.stream_synchronize(reader);
  EXPECT_TRUE(ex.event_query(e));
  EXPECT_EQ(got.vector(), ones.vector());
  ex.event_synchronize(e);
  ex.event_destroy(e);
  ex.stream_destroy(writer);
  ex.stream_destroy(reader);
}

// write_value stores the flag after the stream's earlier copies, and wait_value holds a
// stream's later tasks until the flag arrives: a producer and a consumer stream exchange
// 10 buffers through one device buffer and two flags, without events.
TEST(Streams, WriteValueAndWaitValueOrderTwoStreams) {
  auto& ex = dev().execution();
  PinnedBuffer<uint64_t> flags(8, 0);  // [0]: filled up to; [1]: consumed up to
  const size_t n = 1 << 14, rounds = 10;
  DeviceBuffer slot(n);
  Stream producer = ex.stream_create(), consumer = ex.stream_create();
  PinnedBuffer<uint8_t> sent(n * rounds), got(n * rounds, 0);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<uint8_t>(i * 7 + i / n);
  for (uint64_t k = 1; k <= rounds; ++k) {
    ex.wait_value(producer, &flags[1], k - 1);  // the consumer has taken the last one
    ex.copy(slot.get(), sent.data() + (k - 1) * n, n, producer);
    ex.write_value(producer, &flags[0], k);
    ex.wait_value(consumer, &flags[0], k);
    ex.copy(got.data() + (k - 1) * n, slot.get(), n, consumer);
    ex.write_value(consumer, &flags[1], k);
  }
  ex.stream_synchronize(consumer);
  ex.stream_synchronize(producer);
  EXPECT_EQ(__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE), rounds);
  EXPECT_EQ(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE), rounds);
  EXPECT_EQ(got.vector(), sent.vector());
  ex.stream_destroy(producer);
  ex.stream_destroy(consumer);
}

TEST(Streams, SynchronizeWaitsForEverythingQueuedBeforeIt) {
  auto& ex = dev().execution();
  std::atomic<int> ran{0};
  Stream s = ex.stream_create();
  for (int i = 0; i < 100; ++i) ex.host_callback(s, [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &ran);
  ex.stream_synchronize(s);
  EXPECT_EQ(ran.load(), 100);
  ex.stream_destroy(s);
  // The default stream too.
  for (int i = 0; i < 10; ++i) ex.host_callback(nullptr, [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &ran);
  ex.stream_synchronize(nullptr);
  EXPECT_EQ(ran.load(), 110);
}

// The planted bug: in each trial a writer stream copies new bytes into device memory and
// a reader stream copies them out, either waiting for the writer's event or not. With the
// delay mode (random 0..2 ms before each task) the reader that does not wait reads stale
// bytes in some of 30 trials (the chance that it never does is about 2^-30), and the one
// that waits never does.
int stale_reads(Execution& ex, strata::device::Memory& mem, bool wait, int trials) {
  const size_t n = 256;
  void* d = mem.alloc(n);
  // Pinned host memory: a copy from or to pageable memory waits for its stream, which
  // would order the reader after the writer by itself.
  auto* pinned = static_cast<uint8_t*>(mem.host_alloc(3 * n));
  uint8_t *zero = pinned, *fresh = pinned + n, *got = pinned + 2 * n;
  std::memset(zero, 0, n);
  std::memset(fresh, 0xab, n);
  Stream writer = ex.stream_create(), reader = ex.stream_create();
  Event e = ex.event_create();
  int stale = 0;
  for (int t = 0; t < trials; ++t) {
    ex.copy(d, zero, n, writer);
    ex.stream_synchronize(writer);
    ex.copy(d, fresh, n, writer);
    ex.event_record(e, writer);
    if (wait) ex.stream_wait(reader, e);
    ex.copy(got, d, n, reader);
    ex.stream_synchronize(reader);
    ex.stream_synchronize(writer);
    stale += std::memcmp(got, fresh, n) != 0;
  }
  mem.host_free(pinned);
  ex.event_destroy(e);
  ex.stream_destroy(writer);
  ex.stream_destroy(reader);
  mem.free(d);
  return stale;
}

// A host task between two copies on its stream: it sees what the copy before it wrote
// (through its views, at an offset inside the allocation), its writes are what the copy
// after it reads, and host memory and nullptr reach it as they are. The CUDA backend
// refuses it by name.
TEST(Streams, HostTasksRunInStreamOrderOnViewsOfDeviceMemory) {
  auto& ex = dev().execution();
  const size_t n = 4096;
  DeviceBuffer d(n * sizeof(int));
  Stream s = ex.stream_create();
  if (!on_emulated()) {
    const void* p = d.get();
    EXPECT_THROW(ex.host_task(s, &p, 1, [](void* const*) {}), strata::InvalidUsage);
    ex.stream_destroy(s);
    return;
  }
  PinnedBuffer<int> in(n), out(n, -1);
  int host_word = 5;
  for (int round = 1; round <= 20; ++round) {
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<int>(i) * round;
    ex.copy(d.get(), in.data(), n * sizeof(int), s);
    const void* ptrs[] = {static_cast<int*>(d.get()) + 1, &host_word, nullptr};
    ex.host_task(s, ptrs, 3, [n, round](void* const* views) {
      int* v = static_cast<int*>(views[0]);  // element 1 of the device buffer
      const int add = *static_cast<int*>(views[1]);
      for (size_t i = 0; i + 1 < n; ++i) v[i] = v[i] + add + (views[2] == nullptr ? round : -1000);
    });
    ex.copy(out.data(), d.get(), n * sizeof(int), s);
    ex.stream_synchronize(s);
    ASSERT_EQ(out[0], 0) << "round " << round;
    for (size_t i = 1; i < n; ++i)
      ASSERT_EQ(out[i], static_cast<int>(i) * round + 5 + round) << "element " << i << ", round " << round;
  }
  ex.stream_destroy(s);
}

TEST(Streams, HostTaskRefusesBadArguments) {
  if (!on_emulated()) GTEST_SKIP() << "the cuda backend refuses every host task";
  auto& ex = dev().execution();
  EXPECT_THROW(ex.host_task(nullptr, nullptr, 1, [](void* const*) {}), strata::InvalidArgument);
  EXPECT_THROW(ex.host_task(nullptr, nullptr, 0, nullptr), strata::InvalidArgument);
  int dummy = 0;
  EXPECT_THROW(ex.host_task(&dummy, nullptr, 0, [](void* const*) {}), strata::InvalidArgument);  // not a stream
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;  // it would report the planted race, as it should
#else
constexpr bool kThreadSanitizer = false;
#endif

TEST(Streams, DelayModeCatchesAMissingWait) {
  if (!on_emulated()) GTEST_SKIP() << "the delay mode is the emulated backend's";
  auto delayed = strata::device::emulated::make_backend({.delay_us = 2000});
  if (!kThreadSanitizer) {
    EXPECT_GT(stale_reads(delayed->execution(), delayed->memory(), false, 30), 0)
        << "a reader that does not wait for the writer was never caught";
  }
  EXPECT_EQ(stale_reads(delayed->execution(), delayed->memory(), true, 30), 0) << "a reader that waits read stale bytes";
}

}  // namespace
}  // namespace strata_test
