// Registration cache: one registration per region, hits afterwards, invalidation and
// eviction of unheld regions only.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "strata/error.hpp"
#include "transports/ibverbs/ib_regcache.hpp"

using namespace strata::ibverbs;

namespace {
struct FakeNic {
  int regs = 0, deregs = 0;
  std::map<uint32_t, size_t> live;  // key -> length
  uint32_t next = 100;
  RegCache cache(size_t max = size_t(1) << 30) {
    return RegCache(
        [this](void*, size_t len) {
          ++regs;
          Region r;
          r.lkey = r.rkey = next++;
          live[r.lkey] = len;
          return r;
        },
        [this](const Region& r) {
          ++deregs;
          live.erase(r.lkey);
        },
        max);
  }
};
}  // namespace

TEST(IbRegCache, RegistersOnceThenHits) {
  FakeNic nic;
  std::vector<char> buf(1 << 20);
  {
    RegCache c = nic.cache();
    const Region& a = c.acquire(buf.data(), buf.size());
    EXPECT_EQ(nic.regs, 1);
    EXPECT_EQ(a.begin % 4096, 0u);
    EXPECT_GE(a.end, reinterpret_cast<uintptr_t>(buf.data()) + buf.size());
    const Region& b = c.acquire(buf.data() + 4096, 8192);  // inside: a hit
    EXPECT_EQ(&a, &b);
    EXPECT_EQ(nic.regs, 1);
    EXPECT_EQ(c.hits(), 1u);
    c.release(a);
    c.release(b);
    const Region& again = c.acquire(buf.data(), 100);  // still cached while unheld
    EXPECT_EQ(nic.regs, 1);
    c.release(again);
    EXPECT_EQ(c.regions(), 1u);
  }
  EXPECT_EQ(nic.deregs, 1);  // the cache's end deregisters what it holds
  EXPECT_TRUE(nic.live.empty());
}

TEST(IbRegCache, InvalidateDropsOnlyUnheldOverlappingRegions) {
  FakeNic nic;
  std::vector<char> a(1 << 16), b(1 << 16);
  RegCache c = nic.cache();
  const Region& ra = c.acquire(a.data(), a.size());
  const Region& rb = c.acquire(b.data(), b.size());
  EXPECT_EQ(c.invalidate(a.data(), a.size()), 0);  // held
  c.release(ra);
  EXPECT_EQ(c.invalidate(a.data(), a.size()), 1);
  EXPECT_EQ(nic.deregs, 1);
  c.acquire(a.data(), a.size());  // registers anew
  EXPECT_EQ(nic.regs, 3);
  c.release(rb);
  EXPECT_THROW(c.release(rb), strata::InternalError);  // released twice
}

TEST(IbRegCache, EvictsLeastRecentlyUsedBeyondTheLimit) {
  FakeNic nic;
  std::vector<std::vector<char>> bufs(4, std::vector<char>(1 << 16));
  RegCache c = nic.cache(3 * ((1 << 16) + 4096));
  for (auto& b : bufs) c.release(c.acquire(b.data(), b.size()));
  EXPECT_EQ(nic.regs, 4);
  EXPECT_EQ(nic.deregs, 1);  // the oldest went
  EXPECT_EQ(c.regions(), 3u);
  c.release(c.acquire(bufs[3].data(), 10));  // newest: still there
  EXPECT_EQ(nic.regs, 4);
  c.release(c.acquire(bufs[0].data(), 10));  // oldest: registered again
  EXPECT_EQ(nic.regs, 5);
}
