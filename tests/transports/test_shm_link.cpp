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
#include "transports/shm/shm_link.hpp"

namespace strata {
namespace {

struct LinkPair {
  std::shared_ptr<ShmSegment> a_seg, b_seg;  // a_seg holds the ring a reads from
  std::unique_ptr<ShmLink> a, b;             // a: rank 0's link to rank 1; b: the reverse
  explicit LinkPair(size_t ring_bytes) {
    const std::string base = "/strata-shmlink-test-" + std::to_string(getpid());
    a_seg = ShmSegment::create(base + "-a", 1, ring_bytes);
    b_seg = ShmSegment::create(base + "-b", 1, ring_bytes);
    a = std::make_unique<ShmLink>(1, b_seg->ring(0), a_seg->ring(0), b_seg, a_seg);
    b = std::make_unique<ShmLink>(0, a_seg->ring(0), b_seg->ring(0), a_seg, b_seg);
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
    p.a->post_recv(xa.data(), count * 8, Reduction{sum, 8, reinterpret_cast<const char*>(xa.data()), false});
    p.b->post_recv(yb.data(), count * 8, Reduction{sum, 8, reinterpret_cast<const char*>(yb.data()), false});
    ASSERT_TRUE(p.run()) << count;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(xa[i], x[i] + y[i]) << count << " @" << i;
      ASSERT_EQ(yb[i], x[i] + y[i]) << count << " @" << i;
    }
  }
}

// The record says shared memory forwards reductions (STRATA_SHM_DIRECT_BYTES is off by
// default) and streams, and the link does forward: what a forwarding receive reduces comes
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
    p.b->post_recv(mine.data(), count * 4, Reduction{sum, 4, reinterpret_cast<const char*>(y.data()), true});
    p.a->post_recv(back.data(), count * 4, {});
    ASSERT_TRUE(p.run()) << count;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(mine[i], x[i] + y[i]) << count << " @" << i;
      ASSERT_EQ(back[i], x[i] + y[i]) << count << " @" << i;
    }
  }
}

}  // namespace
}  // namespace strata
