// Connections made on need (core/connector.hpp), rank by rank in threads of this process:
// each rank a control channel and a connector over a table the test writes (hosts of its
// choosing: tcp between hosts, shm inside one), driven as a call's wait drives them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/unique_id.hpp"
#include "core/connector.hpp"
#include "strata/error.hpp"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

// A job of `n` ranks whose listeners exist; rank r is on host hosts[r].
struct Ranks {
  std::vector<bootstrap::RankInfo> table;
  std::vector<net::Fd> listeners;
  bootstrap::Secret secret = bootstrap::random_secret();
  Config cfg = Config::from_env();
  explicit Ranks(const std::vector<std::string>& hosts) {
    for (size_t r = 0; r < hosts.size(); ++r) {
      listeners.push_back(net::listen_on(net::parse_host_port("127.0.0.1:0")));
      bootstrap::RankInfo info{};
      info.listen = net::local_address(listeners.back().get());
      std::snprintf(info.host, sizeof info.host, "%s", hosts[r].c_str());
      info.tcp_nsocks = 2;
      table.push_back(info);
    }
  }
};

// One rank's side: what a communicator's engine holds.
struct Rank {
  Rank(Ranks& job, int r)
      : control(r, static_cast<int>(job.table.size()), job.cfg),
        connector(r, job.table, net::Incoming(std::move(job.listeners[static_cast<size_t>(r)])), job.secret, 7, job.cfg,
                  control) {}
  ControlChannel control;
  Connector connector;

  // Wants `peers` and drives the connector until every one is ready (or fails), as a call's
  // wait does; throws the failure of a pair, or after `seconds`.
  void connect(const std::vector<int>& peers, double seconds = 20) {
    for (int p : peers) connector.want(p, MemoryKind::host);
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      control.check_now();
      bool all = true;
      for (int p : peers) {
        connector.raise(p);
        all &= connector.ready(p, MemoryKind::host);
      }
      if (all) return;
      if (Clock::now() > until) throw std::runtime_error("not connected in time");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Keeps taking what peers ask of it, as a rank waiting in a call does, until `done`
  // (or 20 s).
  template <class Done>
  void serve_until(Done done) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (!done() && Clock::now() < until) {
      control.check_now();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
};

// Every rank sends each peer 4 KiB naming the pair and receives the same from it.
void exchange(Rank& me, int rank, const std::vector<int>& peers) {
  constexpr size_t kBytes = 4096;
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<Link*> links;
  for (int p : peers) {
    Link* l = me.connector.links(MemoryKind::host)[static_cast<size_t>(p)].get();
    ASSERT_NE(l, nullptr) << "no link from " << rank << " to " << p;
    out.emplace_back(kBytes, static_cast<uint8_t>(rank * 16 + p));
    in.emplace_back(kBytes, 0);
    l->post_send(out.back().data(), kBytes);
    l->post_recv(in.back().data(), kBytes, {});
    links.push_back(l);
  }
  const auto until = Clock::now() + std::chrono::seconds(20);
  for (bool idle = false; !idle;) {
    idle = true;
    for (Link* l : links) {
      l->progress();
      idle &= l->idle();
    }
    ASSERT_LT(Clock::now(), until) << "transfers stalled";
  }
  for (size_t i = 0; i < peers.size(); ++i)
    EXPECT_EQ(in[i], std::vector<uint8_t>(kBytes, static_cast<uint8_t>(peers[i] * 16 + rank)))
        << rank << " from " << peers[i];
}

std::vector<int> everyone_but(int me, int n) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r)
    if (r != me) v.push_back(r);
  return v;
}

// Every rank wants every other at the same moment, over tcp and over shm: each pair ends
// with one control connection and one link each way, whichever side asked first, and the
// links carry what was sent.
void all_at_once(const std::vector<std::string>& hosts, const char* transport) {
  Ranks job(hosts);
  const int n = static_cast<int>(hosts.size());
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(job, r));
  std::vector<std::thread> ts;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        ranks[static_cast<size_t>(r)]->connect(everyone_but(r, n));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->connector.connected_peers(), static_cast<size_t>(n - 1)) << "rank " << r;
    for (int p : everyone_but(r, n))
      EXPECT_STREQ(ranks[static_cast<size_t>(r)]->connector.links(MemoryKind::host)[static_cast<size_t>(p)]->name(),
                   transport);
  }
  ts.clear();
  for (int r = 0; r < n; ++r) ts.emplace_back([&, r] { exchange(*ranks[static_cast<size_t>(r)], r, everyone_but(r, n)); });
  for (auto& t : ts) t.join();
}

}  // namespace

TEST(Connector, EveryPairAtOnceOverTcpConnectsOnce) { all_at_once({"a", "b", "c", "d", "e", "f"}, "tcp"); }

TEST(Connector, EveryPairAtOnceOverShmConnectsOnce) { all_at_once({"h", "h", "h", "h"}, "shm"); }

// One side asks, the other only serves (it is waiting in a call that does not need the
// pair): the pair connects, once, whichever of the two is the higher rank.
TEST(Connector, OneSideAskingIsEnough) {
  for (int asking : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(asking) + " asks");
    Ranks job({"a", "b"});
    Rank r0(job, 0), r1(job, 1);
    Rank& asker = asking == 0 ? r0 : r1;
    Rank& server = asking == 0 ? r1 : r0;
    std::atomic<bool> asked{false};
    // The asker's side may be ready a frame before the server's: it serves on until both are.
    std::thread serving([&] {
      server.serve_until([&] { return asked.load() && server.connector.ready(asking, MemoryKind::host); });
    });
    EXPECT_NO_THROW(asker.connect({1 - asking}));
    asked.store(true);
    serving.join();
    EXPECT_TRUE(server.connector.ready(asking, MemoryKind::host));
    EXPECT_EQ(r0.connector.connected_peers(), 1u);
    EXPECT_EQ(r1.connector.connected_peers(), 1u);
  }
}

// A peer that is gone before the pair connects: the wait that needs it fails naming it,
// at once when this rank calls (its listener refuses), within a second or two when this
// rank awaits its call (it checks the listener), and no wait that does not need it fails.
TEST(Connector, APeerThatDiedBeforeConnectingIsNamed) {
  Ranks job({"a", "b", "c"});
  auto r0 = std::make_unique<Rank>(job, 0);
  auto r1 = std::make_unique<Rank>(job, 1);
  auto r2 = std::make_unique<Rank>(job, 2);
  r1.reset();  // rank 1 exits: its listener closes
  for (Rank* me : {r2.get(), r0.get()}) {
    const int rank = me == r0.get() ? 0 : 2;
    const auto t0 = Clock::now();
    try {
      me->connect({1}, 20);
      ADD_FAILURE() << "rank " << rank << " connected to a rank that is gone";
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer(), 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "rank " << rank << " named rank 1 after " << took << " s\n";
    EXPECT_LT(took, 5.0);
  }
  // The pair 0-2 still connects: rank 1's failure is its own pair's.
  std::thread t([&] { r2->connect({0}); });
  EXPECT_NO_THROW(r0->connect({2}));
  t.join();
}

// A stranger at the listen port while a pair connects: one that says nothing, one with the
// wrong secret. The pair connects as if they were not there; the strangers are refused.
TEST(Connector, StrangersAtTheListenerDelayNoPair) {
  Ranks job({"a", "b"});
  const net::SockAddr at = job.table[0].listen;
  Rank r0(job, 0);
  net::Fd silent = net::connect_to(at, net::deadline_after(5));
  net::Fd wrong = net::connect_to(at, net::deadline_after(5));
  bootstrap::Secret forged = job.secret;
  forged.bytes[3] ^= 0x40;
  const net::Hello h = net::make_hello(forged.bytes, 7, 1, 2, net::Role::control, 0);
  net::send_all(wrong.get(), &h, sizeof h, net::deadline_after(5), "rank 0");
  Rank r1(job, 1);
  const auto t0 = Clock::now();
  std::thread t([&] { r1.connect({0}); });
  EXPECT_NO_THROW(r0.connect({1}));
  t.join();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(took, 1.5) << "the pair waited for a stranger";
  EXPECT_EQ(r0.connector.connected_peers(), 1u);
  std::thread other([&] { exchange(r1, 1, {0}); });
  exchange(r0, 0, {1});
  other.join();
}
