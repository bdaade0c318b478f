// The collective table's buffer geometry and describe()'s checks, against NCCL's
// definitions written out here case by case (an oracle independent of the table).
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "ground/call.hpp"
#include "strata/error.hpp"

using namespace strata;

namespace {

struct Expected {
  size_t send, recv;  // elements this rank reads / writes
};

// NCCL's buffer sizes for `count` on rank r of n with `root`.
Expected nccl(Collective c, size_t count, int n, int r, int root) {
  const size_t N = static_cast<size_t>(n);
  switch (c) {
    case Collective::all_reduce: return {count, count};
    case Collective::reduce_scatter: return {count * N, count};
    case Collective::all_gather: return {count, count * N};
    case Collective::broadcast: return {r == root ? count : 0, count};
    case Collective::reduce: return {count, r == root ? count : 0};
    case Collective::all_to_all: return {count * N, count * N};
    case Collective::barrier: return {0, 0};
    case Collective::send: return {count, 0};
    case Collective::recv: return {0, count};
  }
  return {0, 0};
}

}  // namespace

TEST(CollectiveTable, GeometryIsNcclsForEveryCollectiveRankAndRoot) {
  for (int c = 0; c < kNumCollectives; ++c)
    for (int n : {1, 2, 3, 7})
      for (int r = 0; r < n; ++r)
        for (int root = 0; root < n; ++root)
          for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
            auto coll = static_cast<Collective>(c);
            Geometry g = geometry(coll, count, n, r, root);
            Expected e = nccl(coll, count, n, r, root);
            EXPECT_EQ(g.send_count, e.send) << name(coll) << " n=" << n << " r=" << r << " root=" << root;
            EXPECT_EQ(g.recv_count, e.recv) << name(coll) << " n=" << n << " r=" << r << " root=" << root;
          }
}

TEST(CollectiveTable, InPlaceFormsAreNccls) {
  std::vector<float> buf(4 * 10);
  float* b = buf.data();
  const int n = 4, r = 2;
  const size_t count = 10;
  auto in_place = [&](Collective c, const void* send, void* recv) {
    return is_in_place(geometry(c, count, n, r, 0), send, recv, sizeof(float));
  };
  EXPECT_TRUE(in_place(Collective::all_reduce, b, b));
  EXPECT_FALSE(in_place(Collective::all_reduce, b, b + 1));
  EXPECT_TRUE(in_place(Collective::reduce_scatter, b, b + r * count));  // recv = send + rank*recvcount
  EXPECT_FALSE(in_place(Collective::reduce_scatter, b, b));
  EXPECT_TRUE(in_place(Collective::all_gather, b + r * count, b));  // send = recv + rank*sendcount
  EXPECT_FALSE(in_place(Collective::all_gather, b, b));
  EXPECT_TRUE(in_place(Collective::all_to_all, b, b));
  EXPECT_FALSE(in_place(Collective::send, b, b));
}

TEST(CollectiveTable, NamesRoundTripAndUnknownNamesAreRefused) {
  const char* names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                         "all_to_all", "barrier",        "send",       "recv"};
  for (int c = 0; c < kNumCollectives; ++c) {
    EXPECT_STREQ(name(static_cast<Collective>(c)), names[c]);
    EXPECT_EQ(parse_collective(names[c]), static_cast<Collective>(c));
  }
  EXPECT_FALSE(parse_collective("allreduce").has_value());
  EXPECT_STREQ(name(static_cast<Collective>(kNumCollectives)), "invalid");
}

TEST(Describe, DerivesInPlaceAndIgnoresArgumentsACallDoesNotTake) {
  std::vector<int32_t> buf(3 * 5);
  Call k = describe(Collective::reduce_scatter, buf.data(), buf.data() + 5, 5, DataType::int32,
                    ReduceOp::max, /*root=*/99, /*rank=*/1, /*nranks=*/3);
  EXPECT_TRUE(k.in_place);
  EXPECT_EQ(k.root, 0);  // reduce_scatter has no root: 99 is ignored, not refused
  EXPECT_EQ(k.op, ReduceOp::max);
  EXPECT_EQ(k.bytes(), 5 * sizeof(int32_t));
  Call g = describe(Collective::all_gather, buf.data(), buf.data() + 5, 5, DataType::int32,
                    static_cast<ReduceOp>(77), 0, 1, 3);  // all_gather takes no op: not checked
  EXPECT_FALSE(g.in_place);
}

TEST(Describe, RefusesWhatNcclRefuses) {
  std::vector<float> a(64), b(64);
  // Thrown: what every rank passes alike, so every rank reaches the same verdict.
  auto refused = [](auto fn) {
    try {
      fn();
    } catch (const InvalidArgument&) {
      return true;
    }
    return false;
  };
  // Recorded as this rank's own fault, for the communicator to refuse on every rank.
  auto fault = [](const Call& k) { return k.fault; };
  const auto f32 = DataType::float32;
  const auto sum = ReduceOp::sum;
  // Unknown type and op; a collective's root out of range.
  EXPECT_TRUE(refused([&] { describe(Collective::all_reduce, a.data(), b.data(), 4, static_cast<DataType>(42), sum, 0, 0, 2); }));
  EXPECT_TRUE(refused([&] { describe(Collective::reduce, a.data(), b.data(), 4, f32, static_cast<ReduceOp>(9), 0, 0, 2); }));
  EXPECT_TRUE(refused([&] { describe(Collective::broadcast, a.data(), b.data(), 4, f32, sum, 2, 0, 2); }));
  // A send/recv peer is this rank's own: out of range it is a fault, not a throw.
  EXPECT_FALSE(refused([&] { describe(Collective::send, a.data(), nullptr, 4, f32, sum, -1, 0, 2); }));
  EXPECT_EQ(fault(describe(Collective::send, a.data(), nullptr, 4, f32, sum, -1, 0, 2)), Fault::bad_peer);
  EXPECT_EQ(fault(describe(Collective::recv, nullptr, b.data(), 4, f32, sum, 2, 0, 2)), Fault::bad_peer);
  // A count whose bytes, times the ranks for per-rank buffers, overflow.
  EXPECT_TRUE(refused([&] { describe(Collective::all_gather, a.data(), b.data(), SIZE_MAX / 8, f32, sum, 0, 0, 4); }));
  EXPECT_FALSE(refused([&] { describe(Collective::all_gather, a.data(), b.data(), 16, f32, sum, 0, 0, 4); }));
  EXPECT_EQ(fault(describe(Collective::all_gather, a.data(), b.data(), 16, f32, sum, 0, 0, 4)), Fault::none);
  // Null buffers where this rank uses them; broadcast's send on a non-root rank is unused.
  EXPECT_EQ(fault(describe(Collective::all_reduce, nullptr, b.data(), 4, f32, sum, 0, 0, 2)), Fault::null_buffer);
  EXPECT_EQ(fault(describe(Collective::broadcast, nullptr, b.data(), 4, f32, sum, 0, 1, 2)), Fault::none);
  EXPECT_EQ(fault(describe(Collective::broadcast, nullptr, b.data(), 4, f32, sum, 1, 1, 2)), Fault::null_buffer);
  EXPECT_EQ(fault(describe(Collective::reduce, a.data(), nullptr, 4, f32, sum, 0, 1, 2)), Fault::none);
  // Overlap that is not the in-place form.
  EXPECT_EQ(fault(describe(Collective::all_reduce, a.data(), a.data() + 1, 4, f32, sum, 0, 0, 2)), Fault::overlap);
  EXPECT_EQ(fault(describe(Collective::all_gather, a.data(), a.data(), 4, f32, sum, 0, 1, 2)), Fault::overlap);
  EXPECT_EQ(fault(describe(Collective::all_gather, a.data() + 4, a.data(), 4, f32, sum, 0, 1, 2)), Fault::none);
  // Their messages name the call and the argument.
  Call k = describe(Collective::broadcast, a.data(), a.data() + 2, 4, f32, sum, 0, 0, 2);
  EXPECT_EQ(fault_message(k, 2), "broadcast: send and receive buffers overlap but are not in place");
  k = describe(Collective::send, nullptr, nullptr, 4, f32, sum, 1, 0, 2);
  EXPECT_EQ(fault_message(k, 2), "send: buffer is null with count 4");
  k = describe(Collective::recv, nullptr, b.data(), 4, f32, sum, 5, 0, 2);
  EXPECT_EQ(fault_message(k, 2), "recv: peer 5 is not a rank of this communicator (size 2)");
  // Count 0: nothing is read or written, so null buffers are fine.
  EXPECT_EQ(fault(describe(Collective::all_reduce, nullptr, nullptr, 0, f32, sum, 0, 0, 2)), Fault::none);
}

// Impossible counts: every collective, on every rank of 1, 2, 3 and 8, root first and
// last, in place and not, every type. A count is impossible when the largest buffer of the
// call would exceed kMaxBufferBytes (2^47 bytes); the largest possible count must pass, so
// the bound is exact. The pointers are never dereferenced by describe().
TEST(Describe, RefusesEveryImpossibleCountOnEveryRankAlike) {
  alignas(64) static char arena[64];
  long tried = 0, accepted = 0, possible_refused = 0;
  for (int c = 0; c < kNumCollectives; ++c)
    for (int n : {1, 2, 3, 8})
      for (int r = 0; r < n; ++r)
        for (int root : {0, n - 1})
          for (bool in_place : {false, true})
            for (int t = 0; t < kNumDataTypes; ++t) {
              auto coll = static_cast<Collective>(c);
              auto type = static_cast<DataType>(t);
              const size_t per_elem = size_of(type) * blocks_per_buffer(coll, n);
              const size_t largest = kMaxBufferBytes / per_elem;
              for (size_t count : {largest + 1, (size_t{1} << 48) / size_of(type), size_t{1} << 60,
                                   SIZE_MAX / size_of(type), SIZE_MAX}) {
                if (count <= largest) continue;
                // In place: the buffers as the in-place form has them for this count.
                Geometry g = geometry(coll, count, n, r, root);
                // (as integers: the offset overflows a pointer, which is undefined)
                auto past = [&](size_t elems) {
                  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(arena) + elems * size_of(type));
                };
                char* recv = arena;
                const char* send = in_place && g.in_place == InPlace::send_in_recv ? past(g.in_place_offset)
                                   : in_place && g.in_place == InPlace::recv_in_send ? arena
                                   : in_place ? arena : arena + 32;
                if (in_place && g.in_place == InPlace::recv_in_send) recv = past(g.in_place_offset);
                ++tried;
                try {
                  describe(coll, send, recv, count, type, ReduceOp::sum, root, r, n);
                  ++accepted;
                  ADD_FAILURE() << name(coll) << " count " << count << " of " << name(type) << " accepted on rank " << r
                                << " of " << n << (in_place ? " in place" : "");
                } catch (const InvalidArgument&) {
                }
              }
              try {
                describe(coll, arena, arena + 32, largest, type, ReduceOp::sum, root, r, n);
              } catch (const InvalidArgument& e) {
                // Overlap of the fake buffers is not what this checks.
                if (std::string(e.what()).find("larger than any buffer") != std::string::npos) ++possible_refused;
              }
            }
  std::cout << "impossible counts: " << accepted << " of " << tried << " accepted\n";
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(possible_refused, 0) << "a count at the bound was refused";
  EXPECT_GT(tried, 10000);
}
