// The ibverbs data path (IbLink) over in-memory queue pairs: a fake "network" delivers RDMA
// writes late and in batches, checks that every write with immediate finds a posted
// receive (else the real NIC would stall on RNR) and reads the sender's slot only at
// delivery (so reusing a send slot before its write completed would corrupt data).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>

#include "ground/reduce.hpp"
#include "strata/error.hpp"
#include "transports/ibverbs/ib_link.hpp"

using namespace strata;
using namespace strata::ibverbs;

namespace {

struct Net {
  std::deque<std::function<void()>> wire;
  std::string violation;
  void deliver(size_t n) {
    for (size_t i = 0; i < n && !wire.empty(); ++i) {
      auto f = std::move(wire.front());
      wire.pop_front();
      f();
    }
  }
};

class FakeQp final : public QpOps {
 public:
  FakeQp(Net& net, std::string name, uint32_t slots, size_t slot_bytes)
      : net_(net), name_(std::move(name)), slots_(slots), bytes_(slot_bytes), ring_(slots * slot_bytes),
        send_(slots * slot_bytes) {
    recvs_posted_ = slots;
  }
  FakeQp* peer = nullptr;
  bool fail_next_write = false;

  uint32_t send_slots() const override { return slots_; }
  uint32_t recv_slots() const override { return slots_; }
  uint32_t remote_slots() const override { return peer->slots_; }
  char* send_buf(uint32_t s) override { return send_.data() + s * bytes_; }
  const char* recv_buf(uint32_t s) override { return ring_.data() + s * bytes_; }

  void post_write(uint32_t local, uint32_t remote, uint32_t len) override {
    if (local >= slots_ || remote >= peer->slots_ || len > peer->bytes_) net_.violation = "write out of range";
    if (++writes_in_flight_ > slots_) net_.violation = "more writes than send slots";
    if (fail_next_write) {
      fail_next_write = false;
      net_.wire.push_back([this] {
        --writes_in_flight_;
        cq_.push_back({Completion::write, false, 0, "transport retry counter exceeded (vendor error 0x81)"});
      });
      return;
    }
    net_.wire.push_back([this, local, remote, len] {
      FakeQp* p = peer;
      if (p->recvs_posted_ == 0) net_.violation = "write with immediate found no posted receive (RNR)";
      --p->recvs_posted_;
      std::memcpy(p->ring_.data() + remote * p->bytes_, send_buf(local), len);  // read at delivery
      p->cq_.push_back({Completion::recv, true, len, ""});
      --writes_in_flight_;
      cq_.push_back({Completion::write, true, 0, ""});
    });
  }
  void post_credit(uint64_t consumed) override {
    net_.wire.push_back([this, consumed] {
      peer->credit_ = consumed;
      cq_.push_back({Completion::credit, true, 0, ""});
    });
  }
  uint64_t read_credit() const override { return credit_; }
  void post_recv() override {
    if (++recvs_posted_ > slots_) net_.violation = "more receives posted than ring slots";
  }
  int poll(Completion* out, int max) override {
    int n = 0;
    while (n < max && !cq_.empty()) {
      out[n++] = cq_.front();
      cq_.pop_front();
    }
    return n;
  }
  std::string where() const override { return name_; }

 private:
  Net& net_;
  std::string name_;
  uint32_t slots_;
  size_t bytes_;
  std::vector<char> ring_, send_;
  std::deque<Completion> cq_;
  uint64_t credit_ = 0;
  uint32_t recvs_posted_ = 0, writes_in_flight_ = 0;
};

struct Pair {
  Net net;
  std::unique_ptr<IbLink> a, b;  // a is rank 0's link to rank 1, b the reverse
  std::vector<FakeQp*> qa, qb;
  Pair(int nqps, uint32_t slots, size_t chunk, uint32_t batch) {
    std::vector<std::unique_ptr<QpOps>> va, vb;
    for (int i = 0; i < nqps; ++i) {
      auto x = std::make_unique<FakeQp>(net, "fake" + std::to_string(i) + ":1", slots, chunk);
      auto y = std::make_unique<FakeQp>(net, "fake" + std::to_string(i) + ":1", slots, chunk);
      x->peer = y.get();
      y->peer = x.get();
      qa.push_back(x.get());
      qb.push_back(y.get());
      va.push_back(std::move(x));
      vb.push_back(std::move(y));
    }
    a = std::make_unique<IbLink>(1, std::move(va), chunk, batch);
    b = std::make_unique<IbLink>(0, std::move(vb), chunk, batch);
  }
  // Progresses both sides with random delivery until both are idle; false if stuck.
  bool run(std::mt19937& rng, int max_steps = 1000000) {
    for (int i = 0; i < max_steps; ++i) {
      if (!a->idle()) a->progress();
      net.deliver(rng() % 4);
      if (!b->idle()) b->progress();
      net.deliver(rng() % 4);
      if (a->idle() && b->idle() && net.wire.empty()) return true;
    }
    return false;
  }
};

std::vector<float> pattern(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 1000);
  return v;
}

}  // namespace

TEST(IbLink, TransfersBothWaysStripedWithWrapAround) {
  std::mt19937 rng(7);
  for (int nqps : {1, 2, 3}) {
    Pair p(nqps, 3, 4096, 1);
    // Several transfers queued at once each way, of sizes around the chunk size.
    std::vector<size_t> sizes{0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 100000};
    std::vector<std::vector<char>> out_a, in_b, out_b, in_a;
    for (size_t s : sizes) {
      out_a.emplace_back(s);
      out_b.emplace_back(s);
      for (size_t i = 0; i < s; ++i) out_a.back()[i] = static_cast<char>(rng()), out_b.back()[i] = static_cast<char>(rng());
      in_a.emplace_back(s, 0);
      in_b.emplace_back(s, 0);
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      p.a->post_send(out_a[k].data(), sizes[k]);
      p.b->post_send(out_b[k].data(), sizes[k]);
      p.a->post_recv(in_a[k].data(), sizes[k], {});
      p.b->post_recv(in_b[k].data(), sizes[k], {});
    }
    ASSERT_TRUE(p.run(rng)) << nqps << " queue pairs: stuck";
    EXPECT_EQ(p.net.violation, "");
    for (size_t k = 0; k < sizes.size(); ++k) {
      EXPECT_EQ(in_b[k], out_a[k]) << "a->b transfer " << k << " with " << nqps << " queue pairs";
      EXPECT_EQ(in_a[k], out_b[k]) << "b->a transfer " << k << " with " << nqps << " queue pairs";
    }
  }
}

TEST(IbLink, ReducingReceive) {
  std::mt19937 rng(11);
  Pair p(2, 2, 4096, 2);
  const size_t n = 50000;  // 200000 bytes: many chunks through 2 x 2 slots
  std::vector<float> x = pattern(n, 1.f), y = pattern(n, 1000.f), expect(n);
  for (size_t i = 0; i < n; ++i) expect[i] = x[i] + y[i];
  p.a->post_send(x.data(), n * sizeof(float));
  p.b->post_recv(y.data(), n * sizeof(float), Reduction::on_host(reduce_fn(DataType::float32, ReduceOp::sum), sizeof(float), reinterpret_cast<const char*>(y.data()), false));
  ASSERT_TRUE(p.run(rng));
  EXPECT_EQ(p.net.violation, "");
  EXPECT_EQ(y, expect);
}

// What a wrapping link (staging) reuses its buffers by: transfers not done, per direction,
// never more than posted and never growing while nothing new is posted.
TEST(IbLink, OutstandingCountsTransfersNotYetDone) {
  std::mt19937 rng(5);
  Pair p(1, 2, 4096, 1);
  std::vector<char> first(3 * 4096, 'a'), third(5000, 'c'), got1(first.size()), got3(third.size());
  p.a->post_send(first.data(), first.size());
  p.a->post_send(nullptr, 0);
  p.a->post_send(third.data(), third.size());
  for (int i = 0; i < 1000; ++i) {
    p.a->progress();
    p.net.deliver(10);
  }
  // Two chunks fit the peer's ring: the first transfer is not done, so none is.
  EXPECT_EQ(p.a->outstanding().sends, 3u);
  EXPECT_EQ(p.a->outstanding().recvs, 0u);
  p.b->post_recv(got1.data(), got1.size(), {});
  p.b->post_recv(nullptr, 0, {});
  p.b->post_recv(got3.data(), got3.size(), {});
  EXPECT_EQ(p.b->outstanding().recvs, 3u);
  size_t sends = 3, recvs = 3;
  for (int i = 0; i < 1000000 && (sends || recvs); ++i) {
    p.a->progress();
    p.net.deliver(rng() % 4);
    p.b->progress();
    p.net.deliver(rng() % 4);
    ASSERT_LE(p.a->outstanding().sends, sends);
    ASSERT_LE(p.b->outstanding().recvs, recvs);
    sends = p.a->outstanding().sends;
    recvs = p.b->outstanding().recvs;
    if (recvs < 3) {
      EXPECT_EQ(got1, first) << "a receive counted done before its bytes arrived";
    }
  }
  EXPECT_EQ(sends, 0u);
  EXPECT_EQ(recvs, 0u);
  EXPECT_EQ(got3, third);
  ASSERT_TRUE(p.run(rng));
}

TEST(IbLink, SenderAheadOfReceiverWaitsForCredit) {
  std::mt19937 rng(3);
  Pair p(1, 2, 4096, 1);
  std::vector<char> big(10 * 4096, 'x'), got(10 * 4096, 0);
  p.a->post_send(big.data(), big.size());
  for (int i = 0; i < 1000; ++i) {
    p.a->progress();
    p.net.deliver(10);
  }
  EXPECT_FALSE(p.a->idle());  // only 2 chunks fit before the receiver posts anything
  EXPECT_EQ(p.net.violation, "");
  p.b->post_recv(got.data(), got.size(), {});
  ASSERT_TRUE(p.run(rng));
  EXPECT_EQ(got, big);
  EXPECT_EQ(p.net.violation, "");
}

TEST(IbLink, WorkCompletionErrorNamesPeerAndNic) {
  std::mt19937 rng(5);
  Pair p(2, 4, 4096, 1);
  p.qa[1]->fail_next_write = true;
  std::vector<char> buf(3 * 4096, 1);
  p.a->post_send(buf.data(), buf.size());
  try {
    for (int i = 0; i < 100; ++i) {
      p.a->progress();
      p.net.deliver(100);
    }
    FAIL() << "no error";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 1);
    std::string m = e.what();
    EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("fake1:1"), std::string::npos) << m;
    EXPECT_NE(m.find("retry counter exceeded"), std::string::npos) << m;
  }
}

TEST(IbLink, MismatchedSizesArePeerErrors) {
  std::mt19937 rng(9);
  Pair p(1, 4, 4096, 1);
  std::vector<char> s(100, 1), r(200, 0);
  p.a->post_send(s.data(), s.size());
  p.b->post_recv(r.data(), r.size(), {});
  EXPECT_THROW(p.run(rng), PeerError);
}
