// The ipc link's mapping cache (transports/mapping_lru.hpp): a peer's allocations are
// mapped once and reused, evicted least recently used first when the cache is full (the
// sender then sends the handle again), and a peer that frees an allocation this rank
// still maps crashes no one, while a new allocation at the same address is mapped anew.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "device_test.hpp"
#include "ground/settings.hpp"
#include "link_ranks.hpp"
#include "transports/ipc/ipc_link.hpp"

namespace strata_test {
namespace {

// Which of rank 0's four allocations each transfer reads: reuse, and eviction at 2 entries.
const std::vector<int> kUses{0, 0, 1, 0, 2, 1, 3, 0, 3, 2, 1, 0, 0};
constexpr size_t kAllocBytes = 64 << 10;

size_t offset_of(size_t k) { return k * 16; }
size_t bytes_of(size_t k) { return (k + 1) * 100; }

// The number of handles a least-recently-used cache of `capacity` entries must take for
// `uses`, written out on its own (the most recently used last).
size_t lru_misses(const std::vector<int>& uses, size_t capacity) {
  std::vector<int> held;
  size_t misses = 0;
  for (int a : uses) {
    auto it = std::find(held.begin(), held.end(), a);
    if (it != held.end()) {
      held.erase(it);
    } else {
      ++misses;
      if (held.size() == capacity) held.erase(held.begin());
    }
    held.push_back(a);
  }
  return misses;
}

strata::IpcLink& ipc_to(LinkRank& me, int peer) {
  auto* l = dynamic_cast<strata::IpcLink*>(&me.device(peer));
  if (!l) fail("the device link to rank " + std::to_string(peer) + " is not ipc");
  return *l;
}

// Rank 0 sends from its allocations in the order kUses says, all transfers in flight at
// once (so evictions happen while earlier copies are queued); rank 1 checks the bytes and
// what its cache did against lru_misses.
void cache_reuse_and_eviction(LinkRank& me) {
  // The job's LINK_TEST_CACHE when its ranks' settings differ, else the setting.
  const char* job = std::getenv("LINK_TEST_CACHE");
  const size_t capacity = job ? std::stoul(job) : static_cast<size_t>(strata::settings::integer("STRATA_IPC_CACHE_ENTRIES"));
  strata::IpcLink& link = ipc_to(me, 1 - me.rank);
  if (me.rank == 0) {
    std::vector<std::unique_ptr<DeviceBuffer>> allocs;
    for (size_t a = 0; a < 4; ++a) {
      allocs.push_back(std::make_unique<DeviceBuffer>(kAllocBytes));
      std::vector<uint8_t> host(kAllocBytes);
      for (size_t i = 0; i < kAllocBytes; ++i) host[i] = pattern(0, 1, a, i);
      upload(allocs.back()->get(), host.data(), kAllocBytes);
    }
    for (size_t k = 0; k < kUses.size(); ++k) link.post_send(allocs[static_cast<size_t>(kUses[k])]->bytes() + offset_of(k), bytes_of(k));
    drive({&link});
    return;
  }
  DeviceBuffer in(kUses.size() * kAllocBytes);
  for (size_t k = 0; k < kUses.size(); ++k) link.post_recv(in.bytes() + k * kAllocBytes, bytes_of(k), {});
  drive({&link});
  const std::vector<uint8_t> got = download<uint8_t>(in.get(), in.size());
  for (size_t k = 0; k < kUses.size(); ++k)
    for (size_t i = 0; i < bytes_of(k); ++i)
      if (got[k * kAllocBytes + i] != pattern(0, 1, static_cast<size_t>(kUses[k]), offset_of(k) + i))
        fail("transfer " + std::to_string(k) + " (allocation " + std::to_string(kUses[k]) + "): byte " + std::to_string(i));
  link.progress();  // mappings evicted while in use go once their copies are done
  const strata::IpcLink::MappingStats s = link.mapping_stats();
  const size_t want = lru_misses(kUses, capacity);
  const size_t held = std::min<size_t>(capacity, 4);
  if (s.imports != want || s.mapped != held || s.unimports != s.imports - held)
    fail("cache of " + std::to_string(capacity) + ": " + std::to_string(s.imports) + " imports (want " + std::to_string(want) +
         "), " + std::to_string(s.unimports) + " unimports, " + std::to_string(s.mapped) + " mapped (want " +
         std::to_string(held) + ")");
  std::printf("cache of %zu: %llu imports, %llu unimports\n", capacity, static_cast<unsigned long long>(s.imports),
              static_cast<unsigned long long>(s.unimports));
}

// Rank 0 sends from X, frees X while rank 1 maps it, sends from a new allocation Y (often
// at X's address) and frees Y too; rank 1 must read Y's bytes, not X's, and unmapping
// both later (as the link goes) crashes nothing.
void peer_frees_while_mapped(LinkRank& me) {
  constexpr size_t kBytes = 3 << 20;
  strata::IpcLink& link = ipc_to(me, 1 - me.rank);
  if (me.rank == 0) {
    void* where[2] = {};
    for (size_t round = 0; round < 2; ++round) {
      DeviceBuffer b(kBytes);
      where[round] = b.get();
      std::vector<uint8_t> host(kBytes);
      for (size_t i = 0; i < kBytes; ++i) host[i] = pattern(0, 1, round, i);
      upload(b.get(), host.data(), kBytes);
      link.post_send(b.get(), kBytes);
      drive({&link});
    }  // freed here, while rank 1 still maps it
    std::printf("the second allocation %s the first's address\n", where[0] == where[1] ? "reused" : "did not reuse");
    DeviceBuffer done(64);
    link.post_recv(done.get(), 64, {});
    drive({&link});
    return;
  }
  DeviceBuffer in(kBytes);
  for (size_t round = 0; round < 2; ++round) {
    link.post_recv(in.get(), kBytes, {});
    drive({&link});
    const std::vector<uint8_t> got = download<uint8_t>(in.get(), kBytes);
    for (size_t i = 0; i < kBytes; ++i)
      if (got[i] != pattern(0, 1, round, i)) fail("round " + std::to_string(round) + ": byte " + std::to_string(i));
  }
  if (link.mapping_stats().imports != 2) fail("a new allocation at a freed one's address was not mapped anew");
  DeviceBuffer done(64);
  link.post_send(done.get(), 64);
  drive({&link});
}

const bool kRegistered = [] {
  add_scenario("cache", cache_reuse_and_eviction);
  add_scenario("peer_frees", peer_frees_while_mapped);
  return true;
}();

void expect_passed(const std::vector<ProcResult>& res) {
  for (size_t r = 0; r < res.size(); ++r)
    EXPECT_TRUE(res[r].exited && res[r].exit_code == 0) << "rank " << r << ": " << res[r].describe() << "\n" << tail(res[r].out);
}

TEST(DeviceLinks, IpcMappingCacheEvictsLeastRecentlyUsed) {
  const auto res = run_job("cache", {{"hostA"}, {"hostA"}}, {{"STRATA_IPC_CACHE_ENTRIES", "2"}});
  expect_passed(res);
  EXPECT_NE(res[1].out.find("cache of 2: 9 imports, 7 unimports"), std::string::npos) << tail(res[1].out);
}

TEST(DeviceLinks, IpcMappingCacheReusesMappings) {
  const auto res = run_job("cache", {{"hostA"}, {"hostA"}});
  expect_passed(res);
  EXPECT_NE(res[1].out.find("cache of 64: 4 imports, 0 unimports"), std::string::npos) << tail(res[1].out);
}

// The two ends must evict alike: both use the smaller setting.
TEST(DeviceLinks, IpcMappingCacheSizesThatDifferAgreeOnTheSmaller) {
  const auto res = run_job("cache", {{"hostA", {{"STRATA_IPC_CACHE_ENTRIES", "3"}}}, {"hostA", {{"STRATA_IPC_CACHE_ENTRIES", "2"}}}},
                           {{"LINK_TEST_CACHE", "2"}});
  expect_passed(res);
  EXPECT_NE(res[1].out.find("cache of 2: 9 imports, 7 unimports"), std::string::npos) << tail(res[1].out);
}

TEST(DeviceLinks, IpcPeerFreesWhatThisRankStillMaps) {
  const auto res = run_job("peer_frees", {{"hostA"}, {"hostA"}});
  expect_passed(res);
}

}  // namespace
}  // namespace strata_test
