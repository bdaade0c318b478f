// Ranks as threads of one process: the engine, the operation queue (its worker thread)
// and the shm and tcp links under concurrent use, which is what ThreadSanitizer watches
// (tools/sanitize tsan). Results are checked against sums computed here.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "strata/strata.hpp"

namespace strata {
namespace {

// Runs body(comm) on n thread ranks of one job and reports what each threw.
void on_thread_ranks(int n, const std::function<void(Comm&)>& body) {
  setenv("STRATA_SOCKET_IFNAME", "lo", 1);
  UniqueId id = get_unique_id();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Comm c = Comm::init_rank(n, id, r);
        body(c);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

float value(int rank, size_t i) { return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(i % 7); }

class ThreadRanks : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { setenv("STRATA_TRANSPORT", GetParam(), 1); }
  void TearDown() override { unsetenv("STRATA_TRANSPORT"); }
};

// Several operations queued at once (the worker thread runs them) and blocking ones in
// between, repeated: a large all_reduce (over 1 MiB: the store chooser's timed path), a
// small one, an all_gather and a broadcast.
TEST_P(ThreadRanks, QueuedAndBlockingCallsAgreeWithSerialResults) {
  const int n = 3;
  const size_t big = 300000;
  on_thread_ranks(n, [&](Comm& c) {
    const int r = c.rank();
    for (int round = 0; round < 3; ++round) {
      std::vector<float> sum(big);
      for (size_t i = 0; i < big; ++i) sum[i] = value(r, i);
      int32_t mine[5] = {r, -r, 10 * r, round, 7}, most[5];
      std::vector<int64_t> gathered(static_cast<size_t>(n) * 1000), part(1000);
      for (size_t i = 0; i < part.size(); ++i) part[i] = static_cast<int64_t>(r) * 1000000 + static_cast<int64_t>(i);
      Request a = c.all_reduce_async(sum.data(), sum.data(), big, DataType::float32, ReduceOp::sum);
      Request b = c.all_reduce_async(mine, most, 5, DataType::int32, ReduceOp::max);
      Request g = c.all_gather_async(part.data(), gathered.data(), part.size(), DataType::int64);
      std::vector<uint8_t> bytes(4096, static_cast<uint8_t>(r == 2 ? round + 1 : 0));
      c.broadcast(bytes.data(), bytes.data(), bytes.size(), DataType::uint8, 2);
      a.wait();
      b.wait();
      g.wait();
      for (size_t i = 0; i < big; ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += value(q, i);
        ASSERT_EQ(sum[i], want) << "element " << i << " on rank " << r;
      }
      const int32_t want_most[5] = {n - 1, 0, 10 * (n - 1), round, 7};
      for (int i = 0; i < 5; ++i) ASSERT_EQ(most[i], want_most[i]);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < part.size(); ++i)
          ASSERT_EQ(gathered[static_cast<size_t>(q) * part.size() + i], static_cast<int64_t>(q) * 1000000 + static_cast<int64_t>(i));
      for (uint8_t x : bytes) ASSERT_EQ(x, round + 1);
    }
    c.destroy();
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, ThreadRanks, ::testing::Values("shm", "tcp"));

// abort() from a second thread while the first waits: the waiter gets an error at once,
// and the peer, waiting on this rank, gets a PeerError naming it.
TEST(ThreadRanksAbort, AbortFromAnotherThreadFailsTheWaiterAndThePeer) {
  setenv("STRATA_TIMEOUT", "60", 1);
  std::string waiter_error, peer_error;
  int peer_blamed = -2;
  double peer_waited_s = -1;
  on_thread_ranks(2, [&](Comm& c) {
    float x = 1;
    if (c.rank() == 0) {
      Request never = c.recv_async(&x, 1, DataType::float32, 1);  // rank 1 sends nothing
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        c.abort();
      });
      try {
        never.wait();
      } catch (const Error& e) {
        waiter_error = e.what();
      }
      aborter.join();
    } else {
      auto start = std::chrono::steady_clock::now();
      try {
        c.recv(&x, 1, DataType::float32, 0);  // rank 0 sends nothing either, then aborts
      } catch (const PeerError& e) {
        peer_error = e.what();
        peer_blamed = e.peer();
      }
      peer_waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  });
  unsetenv("STRATA_TIMEOUT");
  EXPECT_NE(waiter_error, "");
  EXPECT_NE(peer_error, "");
  EXPECT_EQ(peer_blamed, 0) << peer_error;
  EXPECT_LT(peer_waited_s, 30.0) << "the peer waited for its timeout instead of noticing the abort";
}

}  // namespace
}  // namespace strata
