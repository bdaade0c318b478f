// The shared-memory link in one process: two segments, a link each way, progressed in
// turn. A random stream of messages (mostly small enough for the inline ring, some
// through the FIFO, some reduced on receipt) must arrive intact and in order while both
// rings wrap many times.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ground/reduce.hpp"
#include "strata/device.hpp"
#include "transports/shm/shm_link.hpp"

namespace strata {
namespace {

struct LinkPair {
  std::shared_ptr<ShmSegment> a_seg, b_seg;  // a_seg holds the ring a reads from
  std::unique_ptr<ShmLink> a, b;             // a: rank 0's link to rank 1; b: the reverse
  // Each side writes through the peer's segment opened by name, as ranks do: so it can
  // prove it may open the owner's files, and zero-copy is on.
  explicit LinkPair(size_t ring_bytes) {
    const std::string base = "/strata-shmlink-test-" + std::to_string(getpid());
    a_seg = ShmSegment::create(base + "-a", 1, ring_bytes);
    b_seg = ShmSegment::create(base + "-b", 1, ring_bytes);
    auto b_seen_by_a = ShmSegment::open(base + "-b"), a_seen_by_b = ShmSegment::open(base + "-a");
    a = std::make_unique<ShmLink>(1, b_seen_by_a->ring(0), a_seg->ring(0), b_seen_by_a, a_seg);
    b = std::make_unique<ShmLink>(0, a_seen_by_b->ring(0), b_seg->ring(0), a_seen_by_b, b_seg);
  }
  // Progress both until both are idle; false if nothing moved for a long while.
  bool run() {
    for (int stalled = 0; stalled < 1000000;) {
      const bool moved = a->progress() | b->progress();
      if (a->idle() && b->idle()) return true;
      stalled = moved ? 0 : stalled + 1;
    }
    return false;
  }
};

size_t pick_size(std::mt19937& rng) {
  const int kind = static_cast<int>(rng() % 10);
  if (kind < 6) return 1 + rng() % ShmInline::kMaxBytes;               // inline, every line count
  if (kind < 8) return ShmInline::kMaxBytes + 1 + rng() % 2048;         // just past it: the FIFO
  return (8 + rng() % (96 << 10)) & ~size_t(7);                          // larger than the inline ring's lines
}

TEST(ShmLink, MixedSizesArriveInOrderThroughBothRings) {
  LinkPair p(64 << 10);  // a small FIFO, so it wraps too
  std::mt19937 rng(7);
  size_t inline_lines = 0;
  for (int batch = 0; batch < 2500; ++batch) {
    // Up to 6 messages in flight from rank 0 to rank 1, then checked.
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<std::vector<char>> sent(n), got(n);
    for (int k = 0; k < n; ++k) {
      const size_t len = pick_size(rng);
      if (len <= ShmInline::kMaxBytes) inline_lines += ShmInline::lines(len);
      sent[k].resize(len);
      for (char& c : sent[k]) c = static_cast<char>(rng());
      got[k].assign(len, 0x5a);
      p.a->post_send(sent[k].data(), len);
      p.b->post_recv(got[k].data(), len, {});
    }
    ASSERT_TRUE(p.run()) << "batch " << batch << " stalled";
    for (int k = 0; k < n; ++k) ASSERT_EQ(sent[k], got[k]) << "batch " << batch << " message " << k;
  }
  EXPECT_GT(inline_lines * 64, 10 * ShmInline::kRingBytes) << "the inline ring should have wrapped many times";
}

TEST(ShmLink, SmallReducingReceiveBothWays) {
  LinkPair p(64 << 10);
  const ReduceFn sum = reduce_fn(DataType::float64, ReduceOp::sum);
  for (size_t count : {size_t(1), size_t(7), size_t(8), size_t(31), size_t(32), size_t(33), size_t(500)}) {
    std::vector<double> x(count), y(count), x_in(count), y_in(count);
    for (size_t i = 0; i < count; ++i) x[i] = 0.5 * static_cast<double>(i), y[i] = 1000.0 + static_cast<double>(i);
    // Each side sends its vector and reduces the other's into a copy of its own.
    std::vector<double> xa = x, yb = y;
    p.a->post_send(x.data(), count * 8);
    p.b->post_send(y.data(), count * 8);
    p.a->post_recv(xa.data(), count * 8, Reduction::on_host(sum, 8, reinterpret_cast<const char*>(xa.data()), false));
    p.b->post_recv(yb.data(), count * 8, Reduction::on_host(sum, 8, reinterpret_cast<const char*>(yb.data()), false));
    ASSERT_TRUE(p.run()) << count;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(xa[i], x[i] + y[i]) << count << " @" << i;
      ASSERT_EQ(yb[i], x[i] + y[i]) << count << " @" << i;
    }
  }
}

// The record says shared memory forwards reductions and streams, and the link does forward: what a forwarding receive reduces comes
// back to the sender, through the inline ring, the FIFO, and the FIFO wrapping mid-message.
TEST(ShmLink, ForwardsWhatItReducesAsItsRecordSays) {
  LinkPair p(64 << 10);
  for (const auto& l : {p.a.get(), p.b.get()}) {
    EXPECT_TRUE(l->caps().forwards_reductions);
    EXPECT_TRUE(l->caps().streaming_stores);
    EXPECT_TRUE(l->caps().memory.has(MemoryKind::host));
    EXPECT_FALSE(l->caps().memory.has(MemoryKind::device));
    EXPECT_FALSE(l->caps().needs_registration);
  }
  const ReduceFn sum = reduce_fn(DataType::int32, ReduceOp::sum);
  for (size_t count : {size_t(3), size_t(64), size_t(1000), size_t(100000)}) {
    std::vector<int32_t> x(count), y(count), back(count, -1);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<int32_t>(i * 7 + 1), y[i] = static_cast<int32_t>(count - i);
    std::vector<int32_t> mine = y;  // b reduces x into its copy of y and forwards the result
    p.a->post_send(x.data(), count * 4);
    p.b->post_recv(mine.data(), count * 4, Reduction::on_host(sum, 4, reinterpret_cast<const char*>(y.data()), true));
    p.a->post_recv(back.data(), count * 4, {});
    ASSERT_TRUE(p.run()) << count;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(mine[i], x[i] + y[i]) << count << " @" << i;
      ASSERT_EQ(back[i], x[i] + y[i]) << count << " @" << i;
    }
  }
}

// Zero-copy forwards (docs/transports.md, "Zero-copy"): with both ends' buffers from
// strata::alloc, the forward of a reducing receive read in place is written into the
// receive's landing on the other side (STRATA_SHM_ZEROCOPY_PUSH, on by default) or, off,
// read back from the forwarder's destination. The results are the same either way; the
// ring's pushes_done counter says which path ran. Sizes: at the zero-copy threshold, an
// odd number of 64 KiB pieces, and over one 1 MiB piece with a tail.
TEST(ShmLink, ZeroCopyForwardPushedOrReadBack) {
  const ReduceFn sum = reduce_fn(DataType::int32, ReduceOp::sum);
  for (bool push : {true, false}) {
    setenv("STRATA_SHM_ZEROCOPY_PUSH", push ? "1" : "0", 1);
    LinkPair p(64 << 10);
    unsetenv("STRATA_SHM_ZEROCOPY_PUSH");
    uint64_t forwards = 0;
    for (size_t count : {size_t(16384), size_t(5 * 16384 + 3), size_t(300000)}) {
      const size_t bytes = count * 4;
      auto* x = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
      auto* y = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
      auto* mine = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
      auto* back = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
      for (size_t i = 0; i < count; ++i) {
        x[i] = static_cast<int32_t>(i * 7 + 1);
        y[i] = static_cast<int32_t>(count - i);
        back[i] = -1;
      }
      p.a->post_send(x, bytes);
      p.b->post_recv(mine, bytes, Reduction::on_host(sum, 4, reinterpret_cast<const char*>(y), true));
      p.a->post_recv(back, bytes, {});
      ASSERT_TRUE(p.run()) << count;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(mine[i], x[i] + y[i]) << count << " @" << i;
        ASSERT_EQ(back[i], x[i] + y[i]) << push << " " << count << " @" << i;
      }
      ++forwards;
      EXPECT_EQ(p.a_seg->ring(0)->pushes_done.load(), push ? forwards : 0) << count;
      for (void* b : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(mine), static_cast<void*>(back)})
        free(b);
    }
  }
}

// A plan posts all of its transfers at once (the two-rank ring: a forward per 1 MiB piece),
// more receives than there are landing slots: each forward must still find its landing
// (offered once its receive is among the kLandings oldest not done).
TEST(ShmLink, EveryForwardOfAManyPiecePlanIsWrittenIntoItsLanding) {
  LinkPair p(64 << 10);
  const ReduceFn sum = reduce_fn(DataType::int32, ReduceOp::sum);
  const size_t pieces = 3 * ShmRing::kLandings + 1, count = 20000, bytes = count * 4;
  std::vector<int32_t*> x, y, mine, back;
  for (size_t k = 0; k < pieces; ++k) {
    for (auto* v : {&x, &y, &mine, &back}) v->push_back(static_cast<int32_t*>(alloc(bytes, MemoryKind::host)));
    for (size_t i = 0; i < count; ++i) x[k][i] = static_cast<int32_t>(i + k), y[k][i] = static_cast<int32_t>(3 * k), back[k][i] = -1;
  }
  for (size_t k = 0; k < pieces; ++k) p.a->post_send(x[k], bytes);
  for (size_t k = 0; k < pieces; ++k)
    p.b->post_recv(mine[k], bytes, Reduction::on_host(sum, 4, reinterpret_cast<const char*>(y[k]), true));
  for (size_t k = 0; k < pieces; ++k) p.a->post_recv(back[k], bytes, {});
  ASSERT_TRUE(p.run());
  for (size_t k = 0; k < pieces; ++k)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(back[k][i], x[k][i] + y[k][i]) << "piece " << k << " @" << i;
  EXPECT_EQ(p.a_seg->ring(0)->pushes_done.load(), pieces);
  for (auto* v : {&x, &y, &mine, &back})
    for (int32_t* b : *v) free(b);
}

// A receiver whose call failed (Link::abandon) closes its landings: a forward being
// written into one stops at the next 64 KiB. Here the forwarder has written its first
// 1 MiB piece when the receiver abandons; nothing after it reaches the receiver's buffer.
TEST(ShmLink, AbandonedLandingIsNotWrittenAnyMore) {
  LinkPair p(64 << 10);
  const ReduceFn sum = reduce_fn(DataType::int32, ReduceOp::sum);
  const size_t count = 600000, bytes = count * 4, first = (size_t(1) << 20) / 4;
  auto* x = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
  auto* y = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
  auto* mine = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
  auto* back = static_cast<int32_t*>(alloc(bytes, MemoryKind::host));
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<int32_t>(i), y[i] = 5, back[i] = -1;
  p.a->post_send(x, bytes);
  p.b->post_recv(mine, bytes, Reduction::on_host(sum, 4, reinterpret_cast<const char*>(y), true));
  p.a->post_recv(back, bytes, {});  // offers its landing
  p.a->progress();                  // x's header
  p.b->progress();                  // the header, and the first piece reduced and written
  p.a->abandon();
  ASSERT_TRUE(p.run());
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(mine[i], x[i] + 5) << i;
    ASSERT_EQ(back[i], i < first ? x[i] + 5 : -1) << i;
  }
  EXPECT_EQ(p.a_seg->ring(0)->pushes_done.load(), 1u);  // the forward still ends
  for (void* b : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(mine), static_cast<void*>(back)})
    free(b);
}

}  // namespace
}  // namespace strata
