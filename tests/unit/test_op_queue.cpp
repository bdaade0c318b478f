// The operation queue on its own: order, errors, aborts and the lock-free blocking path,
// checked against what the operations themselves record.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/op_queue.hpp"
#include "strata/error.hpp"

using namespace strata;

TEST(OpQueue, QueuedOperationsRunInTheOrderTheyWereIssued) {
  OpQueue q;
  std::vector<int> ran;
  std::vector<Request> reqs;
  for (int i = 0; i < 500; ++i) reqs.push_back(q.submit([&ran, i] { ran.push_back(i); }));
  for (auto& r : reqs) r.wait();
  ASSERT_EQ(ran.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(ran[i], i);
}

TEST(OpQueue, ABlockingCallRunsAfterEverythingQueuedBeforeIt) {
  OpQueue q;
  for (int round = 0; round < 200; ++round) {
    std::vector<int> ran;
    q.submit([&] { std::this_thread::yield(); ran.push_back(1); });
    q.submit([&] { ran.push_back(2); });
    q.run_now([&] { ran.push_back(3); });
    ASSERT_EQ(ran, (std::vector<int>{1, 2, 3})) << "round " << round;
  }
}

TEST(OpQueue, AnErrorReachesItsRequestAndLaterOperationsStillRun) {
  OpQueue q;
  Request bad = q.submit([] { throw InvalidArgument("planted"); });
  int after = 0;
  Request good = q.submit([&] { after = 7; });
  EXPECT_THROW(bad.wait(), InvalidArgument);
  good.wait();
  EXPECT_EQ(after, 7);
  EXPECT_THROW(q.run_now([] { throw TimeoutError(1, "planted"); }), TimeoutError);
  int now = 0;
  q.run_now([&] { now = 1; });
  EXPECT_EQ(now, 1);
}

TEST(OpQueue, OperationsNeverOverlapAcrossThreads) {
  OpQueue q;
  std::atomic<int> running{0}, most{0}, total{0};
  auto op = [&] {
    int r = ++running;
    int m = most.load();
    while (r > m && !most.compare_exchange_weak(m, r)) {}
    ++total;
    --running;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        if ((i + t) % 3 == 0) q.submit(op);
        else q.run_now(op);
      }
    });
  for (auto& t : threads) t.join();
  q.drain();
  EXPECT_EQ(total.load(), 9000);
  EXPECT_EQ(most.load(), 1);
}

TEST(OpQueue, AbortFailsQueuedOperationsAndLetsTheRunningOneFinish) {
  OpQueue q;
  std::atomic<bool> release{false}, started{false};
  bool first_finished = false, second_ran = false;
  Request first = q.submit([&] {
    started = true;
    while (!release) std::this_thread::yield();
    first_finished = true;
  });
  Request second = q.submit([&] { second_ran = true; });
  while (!started) std::this_thread::yield();
  std::thread aborter([&] { q.abort(std::make_exception_ptr(InvalidUsage("aborted"))); });
  EXPECT_THROW(second.wait(), InvalidUsage);  // dropped before it ran
  release = true;
  aborter.join();
  first.wait();
  EXPECT_TRUE(first_finished);
  EXPECT_FALSE(second_ran);
  // After the abort nothing more runs.
  bool later = false;
  EXPECT_THROW(q.submit([&] { later = true; }).wait(), InvalidUsage);
  EXPECT_FALSE(later);
}

TEST(OpQueue, DrainReturnsOnlyWhenNothingIsQueuedOrRunning) {
  OpQueue q;
  std::atomic<int> done{0};
  for (int i = 0; i < 100; ++i)
    q.submit([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      ++done;
    });
  q.drain();
  EXPECT_EQ(done.load(), 100);
}
