// The device links (transports/ipc on one host, transports/staging between hosts) in
// jobs of two and three processes, each making the real mesh (link_ranks.hpp). Results
// are checked against what the test computes itself: byte patterns for copies, and
// reductions of small integers (exact in every type used) for reducing receives. The
// device suite runs these again with random stream delays (device.AllWithStreamDelays),
// where a completion reported before the stream got there would show as wrong bytes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "ground/reduce.hpp"
#include "ground/settings.hpp"
#include "link_ranks.hpp"
#include "strata/error.hpp"
#include "transports/ipc/ipc_link.hpp"

namespace strata_test {
namespace {

using strata::DataType;
using strata::Link;
using strata::ReduceOp;
using strata::Reduction;

// The chunk size the cases are cut around: the job's LINK_TEST_CHUNK when its ranks'
// settings differ (the cases must be the same on every rank), else the setting.
size_t chunk_setting() {
  if (const char* c = std::getenv("LINK_TEST_CHUNK")) return std::stoul(c);
  return static_cast<size_t>(strata::settings::integer("STRATA_STAGING_CHUNK_BYTES"));
}

// ---- copies: many sizes and offsets, every pair both ways, all in flight at once ----

struct Case {
  size_t size, offset;
  size_t at;  // where its region starts in the buffers
};
constexpr size_t kGuard = 64;
constexpr uint8_t kUntouched = 0xee;

// Sizes around 0, one element, odd, and the staging chunk's boundaries.
std::vector<Case> copy_cases(size_t& total) {
  const size_t c = chunk_setting();
  std::vector<size_t> sizes{0, 1, 4, 7, 63, 64, 65, c - 1, c, c + 1, 2 * c, 3 * c + 5};
  sizes.push_back(std::min<size_t>((1 << 20) + 3, 64 * c + 3));
  std::vector<Case> cases;
  total = 0;
  for (size_t s : sizes)
    for (size_t off : {size_t(0), size_t(1), size_t(8), size_t(333)}) {
      cases.push_back({s, off, total});
      total += off + s + kGuard;
    }
  return cases;
}

void exchange_copies(LinkRank& me) {
  size_t total = 0;
  const std::vector<Case> cases = copy_cases(total);
  struct PerPeer {
    std::unique_ptr<DeviceBuffer> out, in;
  };
  std::vector<PerPeer> bufs(static_cast<size_t>(me.nranks));
  for (int p : peers_of(me)) {
    PerPeer& b = bufs[static_cast<size_t>(p)];
    b.out = std::make_unique<DeviceBuffer>(total);
    b.in = std::make_unique<DeviceBuffer>(total);
    std::vector<uint8_t> host(total, 0);
    for (size_t k = 0; k < cases.size(); ++k)
      for (size_t i = 0; i < cases[k].size; ++i) host[cases[k].at + cases[k].offset + i] = pattern(me.rank, p, k, i);
    upload(b.out->get(), host.data(), total);
    std::vector<uint8_t> untouched(total, kUntouched);
    upload(b.in->get(), untouched.data(), total);
  }
  for (int p : peers_of(me))
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      me.device(p).post_send(bufs[static_cast<size_t>(p)].out->bytes() + c.at + c.offset, c.size);
      me.device(p).post_recv(bufs[static_cast<size_t>(p)].in->bytes() + c.at + c.offset, c.size, {});
    }
  drive(links_of(me));
  for (int p : peers_of(me)) {
    const std::vector<uint8_t> got = download<uint8_t>(bufs[static_cast<size_t>(p)].in->get(), total);
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      for (size_t i = 0; i < c.offset + c.size + kGuard; ++i) {
        const bool data = i >= c.offset && i < c.offset + c.size;
        const uint8_t want = data ? pattern(p, me.rank, k, i - c.offset) : kUntouched;
        if (got[c.at + i] != want)
          fail("from rank " + std::to_string(p) + ", transfer of " + std::to_string(c.size) +
                                           " B at offset " + std::to_string(c.offset) + ": byte " + std::to_string(i) +
                                           (data ? " of the data" : " beside it") + " is " + std::to_string(got[c.at + i]) +
                                           ", want " + std::to_string(want));
      }
    }
  }
}

// ---- reducing receives ----

// bfloat16 as the top half of a float (exact for the small integers used here).
struct Bf16 {
  uint16_t bits;
};
template <class T>
T from_int(long long v) {
  if constexpr (std::is_same_v<T, Bf16>) {
    const float f = static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return Bf16{static_cast<uint16_t>(u >> 16)};
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Bf16>) {
    const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  } else {
    return static_cast<double>(v);
  }
}

double apply(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::max: return std::max(a, b);
    case ReduceOp::min: return std::min(a, b);
    default: throw std::runtime_error("op not in this test");
  }
}

// Reduces, over every pair both ways, `count` elements of T: once with the destination as
// the local operand and once with another buffer (the destination then holds garbage).
// Small values keep every result exact; uint8 sums are made to wrap (checked modulo 256).
template <class T>
void reduce_case(LinkRank& me, DataType type, ReduceOp op, size_t count) {
  const size_t bytes = count * sizeof(T);
  auto value = [&](int who, size_t i) -> long long {
    if (std::is_same_v<T, uint8_t>) return static_cast<long long>((i * 37 + static_cast<size_t>(who) * 101) % 256);
    return static_cast<long long>((i * 3 + static_cast<size_t>(who) * 5) % 11) - (std::is_signed_v<T> ? 3 : 0);
  };
  auto values = [&](int who) {
    std::vector<T> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = from_int<T>(value(who, i));
    return v;
  };
  struct PerPeer {
    std::unique_ptr<DeviceBuffer> out, in_place, dst, local;
  };
  std::vector<PerPeer> bufs(static_cast<size_t>(me.nranks));
  const std::vector<T> mine = values(me.rank);
  const std::vector<uint8_t> garbage(bytes, 0x77);
  for (int p : peers_of(me)) {
    PerPeer& b = bufs[static_cast<size_t>(p)];
    for (auto* d : {&b.out, &b.in_place, &b.dst, &b.local}) *d = std::make_unique<DeviceBuffer>(bytes);
    upload(b.out->get(), mine.data(), bytes);
    upload(b.in_place->get(), mine.data(), bytes);
    upload(b.local->get(), mine.data(), bytes);
    upload(b.dst->get(), garbage.data(), bytes);
    Link& l = me.device(p);
    l.post_send(b.out->get(), bytes);
    l.post_send(b.out->get(), bytes);
    l.post_recv(b.in_place->get(), bytes, Reduction::on_device(type, op, sizeof(T), b.in_place->bytes(), false));
    l.post_recv(b.dst->get(), bytes, Reduction::on_device(type, op, sizeof(T), b.local->bytes(), false));
  }
  drive(links_of(me));
  for (int p : peers_of(me)) {
    const std::vector<T> theirs = values(p);
    for (auto* d : {&bufs[static_cast<size_t>(p)].in_place, &bufs[static_cast<size_t>(p)].dst}) {
      const std::vector<T> got = download<T>((*d)->get(), count);
      for (size_t i = 0; i < count; ++i) {
        double want = apply(op, to_double(mine[i]), to_double(theirs[i]));
        if (std::is_same_v<T, uint8_t>) want = static_cast<double>(static_cast<long long>(want) % 256);
        if (to_double(got[i]) != want)
          fail(std::string(strata::name(type)) + " " + strata::name(op) + " of " +
                                               std::to_string(count) + " from rank " + std::to_string(p) +
                                               (d == &bufs[static_cast<size_t>(p)].dst ? " (local operand apart)" : " (in place)") +
                                               ": element " + std::to_string(i) + " is " + std::to_string(to_double(got[i])) +
                                               ", want " + std::to_string(want));
      }
    }
  }
}

void exchange_reductions(LinkRank& me) {
  const size_t c = chunk_setting();
  for (size_t elems : {size_t(1), size_t(7), size_t(1000), 3 * c / 4 + 1}) {
    reduce_case<float>(me, DataType::float32, ReduceOp::sum, elems);
    reduce_case<double>(me, DataType::float64, ReduceOp::prod, elems);
    reduce_case<int32_t>(me, DataType::int32, ReduceOp::max, elems);
    reduce_case<int64_t>(me, DataType::int64, ReduceOp::min, elems);
    reduce_case<uint8_t>(me, DataType::uint8, ReduceOp::sum, elems);
    reduce_case<Bf16>(me, DataType::bfloat16, ReduceOp::sum, elems);
  }
}

// ---- many transfers in flight both ways (more than the ipc ring's 64 descriptors) ----

void many_in_flight(LinkRank& me) {
  constexpr int kTransfers = 150;
  constexpr size_t kMost = 20000;
  struct PerPeer {
    std::vector<std::unique_ptr<DeviceBuffer>> out;  // three allocations, used in turn
    std::unique_ptr<DeviceBuffer> in;
    std::vector<size_t> in_size, out_size;
  };
  auto sizes = [](int from, int to) {
    std::mt19937 rng(static_cast<unsigned>(from * 1000 + to));
    std::vector<size_t> s(kTransfers);
    for (size_t& x : s) x = 1 + rng() % kMost;
    return s;
  };
  std::vector<PerPeer> bufs(static_cast<size_t>(me.nranks));
  for (int p : peers_of(me)) {
    PerPeer& b = bufs[static_cast<size_t>(p)];
    b.out_size = sizes(me.rank, p);
    b.in_size = sizes(p, me.rank);
    for (int a = 0; a < 3; ++a) b.out.push_back(std::make_unique<DeviceBuffer>(kTransfers * kMost));
    b.in = std::make_unique<DeviceBuffer>(kTransfers * kMost);
    std::vector<uint8_t> host(kTransfers * kMost);
    for (int a = 0; a < 3; ++a) {
      for (size_t k = 0; k < kTransfers; ++k)
        for (size_t i = 0; i < kMost; ++i) host[k * kMost + i] = pattern(me.rank, p, k, i);
      upload(b.out[static_cast<size_t>(a)]->get(), host.data(), host.size());
    }
    for (size_t k = 0; k < kTransfers; ++k) {
      me.device(p).post_send(b.out[k % 3]->bytes() + k * kMost, b.out_size[k]);
      me.device(p).post_recv(b.in->bytes() + k * kMost, b.in_size[k], {});
    }
  }
  drive(links_of(me));
  for (int p : peers_of(me)) {
    const PerPeer& b = bufs[static_cast<size_t>(p)];
    const std::vector<uint8_t> got = download<uint8_t>(b.in->get(), kTransfers * kMost);
    for (size_t k = 0; k < kTransfers; ++k)
      for (size_t i = 0; i < b.in_size[k]; ++i)
        if (got[k * kMost + i] != pattern(p, me.rank, k, i))
          fail("transfer " + std::to_string(k) + " from rank " + std::to_string(p) + ": byte " + std::to_string(i));
  }
}

const bool kRegistered = [] {
  add_scenario("copies", exchange_copies);
  add_scenario("reductions", exchange_reductions);
  add_scenario("many", many_in_flight);
  add_scenario("all", [](LinkRank& me) {
    exchange_copies(me);
    exchange_reductions(me);
    many_in_flight(me);
  });
  return true;
}();

// ---- the jobs ----

void expect_passed(const std::vector<ProcResult>& res) {
  for (size_t r = 0; r < res.size(); ++r)
    EXPECT_TRUE(res[r].exited && res[r].exit_code == 0) << "rank " << r << ": " << res[r].describe() << "\n" << tail(res[r].out);
}

TEST(DeviceLinks, IpcTwoRanksCopiesReductionsAndManyInFlight) {
  expect_passed(run_job("all", {{"hostA"}, {"hostA"}}));
}

TEST(DeviceLinks, StagingTwoHostsCopiesReductionsAndManyInFlight) {
  expect_passed(run_job("all", {{"hostA"}, {"hostB"}}, {{"STRATA_STAGING_CHUNK_BYTES", "4096"}}));
}

// Two ranks on one host and one on another: ipc and staging in one job, each rank with
// both kinds of links at once; the INFO lines name the device link of every peer.
TEST(DeviceLinks, ThreeRanksIpcAndStagingTogether) {
  const auto res = run_job("all", {{"hostA"}, {"hostA"}, {"hostB"}},
                           {{"STRATA_STAGING_CHUNK_BYTES", "4096"}, {"STRATA_DEBUG", "INFO"}});
  expect_passed(res);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_NE(res[0].out.find("rank 0 -> rank 1 via ipc (same host, 64 mappings cached) for device memory"), std::string::npos)
      << tail(res[0].out);
  EXPECT_NE(res[0].out.find("rank 0 -> rank 2 via staging (over tcp, chunks of 4096 B, 4 pinned slots each way) for device memory"),
            std::string::npos)
      << tail(res[0].out);
  EXPECT_NE(res[2].out.find("rank 2 -> rank 1 via staging (over tcp"), std::string::npos) << tail(res[2].out);
  EXPECT_NE(res[1].out.find("rank 1 -> rank 0 via shm"), std::string::npos) << "host links are unchanged\n" << tail(res[1].out);
}

// Chunks of 256 B through 2 slots: every transfer is many chunks, the slots are reused
// all the time, and copies overlap the host link's transfers.
TEST(DeviceLinks, StagingTinyChunksPipeline) {
  expect_passed(run_job("all", {{"hostA"}, {"hostB"}}, {{"STRATA_STAGING_CHUNK_BYTES", "256"}, {"STRATA_STAGING_SLOTS", "2"}}));
}

// The two ends cut transfers alike although their settings differ: both use the smaller.
TEST(DeviceLinks, StagingChunkSizesThatDifferAgreeOnTheSmaller) {
  expect_passed(run_job("copies",
                        {{"hostA", {{"STRATA_STAGING_CHUNK_BYTES", "4096"}}}, {"hostB", {{"STRATA_STAGING_CHUNK_BYTES", "256"}}}},
                        {{"LINK_TEST_CHUNK", "256"}}));
}

}  // namespace
}  // namespace strata_test
