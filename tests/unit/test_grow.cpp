// Comm::grow with ranks as threads of this process (loopback): newcomers join in the
// order of their keys, a newcomer that does not present the communicator's secret is
// refused and never counted, a call on the old communicator during the grow is refused,
// a grow nobody comes to times out on every rank, and a shrunk communicator grows back.
// Each result is checked against the formula of a collective on the grown communicator.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/unique_id.hpp"
#include "strata/strata.hpp"

namespace strata {
namespace {

using namespace std::chrono_literals;

// n ranks of a new communicator, one per thread, each running body(rank, comm).
void with_ranks(int n, const std::function<void(int, Comm&)>& body, const CommOptions& options = {}) {
  setenv("STRATA_SOCKET_IFNAME", "lo", 1);
  const UniqueId id = get_unique_id();
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      Comm c = Comm::init_rank(n, id, r, options);
      body(r, c);
    });
  for (auto& t : ts) t.join();
}

// Until `count` newcomers wait (every rank calls it: it is collective).
void await_newcomers(Comm& c, int count) {
  while (c.newcomers() < count) std::this_thread::sleep_for(10ms);
}

// Every rank's key, gathered in rank order, and the sum of rank + 1 over the communicator.
struct Seen {
  std::vector<int> keys;
  int sum = 0, rank = -1, size = 0;
};
Seen look(Comm& c, int key) {
  Seen s;
  s.rank = c.rank();
  s.size = c.size();
  s.keys.resize(static_cast<size_t>(s.size));
  c.all_gather(&key, s.keys.data(), 1, DataType::int32);
  int mine = s.rank + 1;
  c.all_reduce(&mine, &s.sum, 1, DataType::int32, ReduceOp::sum);
  return s;
}

TEST(Grow, TwoRanksAndTwoNewcomersInKeyOrder) {
  std::promise<UniqueId> door;
  std::shared_future<UniqueId> id = door.get_future().share();
  std::vector<Seen> seen(4);
  // Newcomers with keys 1 and 3 between the existing ranks' 0 and 2.
  std::vector<std::thread> newcomers;
  for (int key : {1, 3})
    newcomers.emplace_back([&, key] {
      Comm c = Comm::join(id.get(), key);
      seen[static_cast<size_t>(key)] = look(c, key);
      c.destroy();
    });
  int old_sum[2] = {0, 0};
  with_ranks(2, [&](int r, Comm& c) {
    const UniqueId made = c.open_door("127.0.0.1:0");
    if (r == 0) door.set_value(made);
    await_newcomers(c, 2);
    Comm grown = c.grow(2, 2 * r);
    seen[static_cast<size_t>(2 * r)] = look(grown, 2 * r);
    int one = 1;
    c.all_reduce(&one, &old_sum[r], 1, DataType::int32, ReduceOp::sum);  // the old one still works
    grown.destroy();
    c.destroy();
  });
  for (auto& t : newcomers) t.join();
  for (int key = 0; key < 4; ++key) {
    EXPECT_EQ(seen[static_cast<size_t>(key)].rank, key) << "key " << key;
    EXPECT_EQ(seen[static_cast<size_t>(key)].size, 4);
    EXPECT_EQ(seen[static_cast<size_t>(key)].keys, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(seen[static_cast<size_t>(key)].sum, 1 + 2 + 3 + 4);
  }
  EXPECT_EQ(old_sum[0], 2);
  EXPECT_EQ(old_sum[1], 2);
}

TEST(Grow, ANewcomerWithAWrongSecretIsRefused) {
  std::promise<UniqueId> door;
  std::shared_future<UniqueId> id = door.get_future().share();
  std::atomic<bool> refused{false};
  std::string why;
  std::thread stranger([&] {
    UniqueId bad = id.get();
    bootstrap::IdFields f = bootstrap::decode_id(bad);
    f.secret.bytes[5] ^= 0x10;
    try {
      Comm::join(bootstrap::encode_id(f), 0);
    } catch (const SystemError& e) {
      why = e.what();
    }
    refused = true;
  });
  Seen newcomer;
  std::thread good;
  std::vector<int> counts[2];
  with_ranks(2, [&](int r, Comm& c) {
    const UniqueId made = c.open_door("127.0.0.1:0");
    if (r == 0) door.set_value(made);
    // Until the stranger has been turned away, nobody waits at the door.
    int stop = 0;
    while (!stop) {
      counts[r].push_back(c.newcomers());
      int mine = refused.load() ? 1 : 0;
      c.all_reduce(&mine, &stop, 1, DataType::int32, ReduceOp::max);
    }
    if (r == 0)
      good = std::thread([&] {
        Comm g = Comm::join(id.get(), 5);
        newcomer = look(g, 5);
        g.destroy();
      });
    await_newcomers(c, 1);
    Comm grown = c.grow(1, r);
    look(grown, r);
    grown.destroy();
    c.destroy();
  });
  stranger.join();
  good.join();
  EXPECT_NE(why.find("closed the connection"), std::string::npos) << why;
  for (const auto& cs : counts)
    for (int n : cs) EXPECT_EQ(n, 0) << "the stranger was counted";
  EXPECT_EQ(newcomer.rank, 2);
  EXPECT_EQ(newcomer.size, 3);
  EXPECT_EQ(newcomer.sum, 1 + 2 + 3);
}

TEST(Grow, ACallOnTheOldCommunicatorDuringTheGrowIsRefused) {
  std::promise<UniqueId> door;
  std::shared_future<UniqueId> id = door.get_future().share();
  std::string refusal;
  Seen newcomer;
  std::thread late([&] {
    std::this_thread::sleep_for(600ms);  // the grow is waiting at the door by then
    Comm g = Comm::join(id.get(), 9);
    newcomer = look(g, 9);
    g.destroy();
  });
  with_ranks(2, [&](int r, Comm& c) {
    const UniqueId made = c.open_door("127.0.0.1:0");
    std::thread meddler;
    if (r == 0) {
      door.set_value(made);
      meddler = std::thread([&] {
        std::this_thread::sleep_for(200ms);
        int x = 1;
        try {
          c.all_reduce(&x, &x, 1, DataType::int32, ReduceOp::sum);
        } catch (const InvalidUsage& e) {
          refusal = e.what();
        }
      });
    }
    Comm grown = c.grow(1, r);
    if (meddler.joinable()) meddler.join();
    look(grown, r);
    grown.destroy();
    c.destroy();
  });
  late.join();
  EXPECT_NE(refusal.find("being grown"), std::string::npos) << refusal;
  EXPECT_EQ(newcomer.size, 3);
  EXPECT_EQ(newcomer.sum, 6);
}

TEST(Grow, NobodyComesTheGrowTimesOutEverywhereAndTheOldOneStillWorks) {
  CommOptions fast;
  fast.timeout_s = 1;
  std::string why[2];
  int sum[2] = {0, 0};
  with_ranks(
      2,
      [&](int r, Comm& c) {
        c.open_door("127.0.0.1:0");
        try {
          c.grow(1, r);
        } catch (const TimeoutError& e) {
          why[r] = e.what();
        }
        int one = 1;
        c.all_reduce(&one, &sum[r], 1, DataType::int32, ReduceOp::sum);
        c.destroy();
      },
      fast);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(why[r].find("0 of 1 newcomers came to the door"), std::string::npos) << why[r];
    EXPECT_EQ(sum[r], 2);
  }
}

TEST(Grow, AShrunkCommunicatorGrowsBack) {
  std::promise<UniqueId> door;
  std::shared_future<UniqueId> id = door.get_future().share();
  Seen newcomer;
  std::thread back([&] {
    Comm g = Comm::join(id.get(), 2);  // takes the place of the rank that left
    newcomer = look(g, 2);
    g.destroy();
  });
  std::vector<Seen> seen(3);
  with_ranks(3, [&](int r, Comm& c) {
    if (r == 2) {
      c.abort();  // gone, without a goodbye
      return;
    }
    int x = 1;
    try {
      c.all_reduce(&x, &x, 1, DataType::int32, ReduceOp::sum);
    } catch (const PeerError&) {
    }
    Comm left = c.shrink();
    c.destroy();
    const UniqueId made = left.open_door("127.0.0.1:0");
    if (r == 0) door.set_value(made);
    await_newcomers(left, 1);
    Comm grown = left.grow(1, r);
    seen[static_cast<size_t>(r)] = look(grown, r);
    grown.destroy();
    left.destroy();
  });
  back.join();
  seen[2] = newcomer;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(seen[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(seen[static_cast<size_t>(r)].keys, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(seen[static_cast<size_t>(r)].sum, 6);
  }
}

TEST(Grow, BadArguments) {
  EXPECT_THROW(Comm::join(UniqueId{}, 0), InvalidArgument);  // not a Strata id
  std::string no_door[2], zero[2];
  with_ranks(2, [&](int r, Comm& c) {
    try {
      c.newcomers();
    } catch (const InvalidUsage& e) {
      no_door[r] = e.what();
    }
    try {
      c.grow(0, r);
    } catch (const InvalidArgument& e) {
      zero[r] = e.what();
    }
    int one = 1, sum = 0;
    c.all_reduce(&one, &sum, 1, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(sum, 2);
    c.destroy();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(no_door[r].find("no door is open"), std::string::npos) << no_door[r];
    EXPECT_NE(zero[r].find("count must be at least 1"), std::string::npos) << zero[r];
  }
}

}  // namespace
}  // namespace strata
