// Link::outstanding() of the links that count exactly (tcp, shm): how many transfers of
// each direction are not done yet, which a wrapping link (staging) reuses its buffers by.
// A transfer counted done must really be: a receive's bytes are all there, a send no
// longer reads its buffer (checked by overwriting it at once).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "ground/socket.hpp"
#include "transports/shm/shm_link.hpp"
#include "transports/tcp/tcp_link.hpp"

namespace strata {
namespace {

// Sizes around tcp's striping threshold (64 KiB) and shm's inline ring (256 B), and empty.
const std::vector<size_t> kSizes{3 << 20, 0, 100, 70000, 1, 256, 257, 2 << 20};

char byte_of(size_t k, size_t i) { return static_cast<char>(k * 41 + i * 7 + (i >> 10)); }

// `a` sends kSizes to `b`. Before `b` posts anything, `a` cannot be done with the first
// (larger than any buffer between them); then both progress until done, and every
// transfer counted done is checked right away.
void check_counts(Link& a, Link& b) {
  std::vector<std::vector<char>> out, in;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    out.emplace_back(kSizes[k]);
    for (size_t i = 0; i < kSizes[k]; ++i) out[k][i] = byte_of(k, i);
    in.emplace_back(kSizes[k], 0);
    a.post_send(out[k].data(), kSizes[k]);
  }
  for (int i = 0; i < 1000; ++i) a.progress();
  ASSERT_EQ(a.outstanding().sends, kSizes.size()) << "the first send cannot be done before its receive is posted";
  for (size_t k = 0; k < kSizes.size(); ++k) b.post_recv(in[k].data(), kSizes[k], {});
  EXPECT_EQ(b.outstanding().recvs, kSizes.size());
  size_t sends_done = 0, recvs_done = 0;
  for (int i = 0; i < 10000000 && (sends_done < kSizes.size() || recvs_done < kSizes.size()); ++i) {
    a.progress();
    b.progress();
    const size_t s = kSizes.size() - a.outstanding().sends, r = kSizes.size() - b.outstanding().recvs;
    ASSERT_GE(s, sends_done);
    ASSERT_GE(r, recvs_done);
    for (; sends_done < s; ++sends_done) std::fill(out[sends_done].begin(), out[sends_done].end(), 'X');
    for (; recvs_done < r; ++recvs_done)
      for (size_t j = 0; j < kSizes[recvs_done]; ++j)
        ASSERT_EQ(in[recvs_done][j], byte_of(recvs_done, j)) << "receive " << recvs_done << " counted done, byte " << j;
  }
  EXPECT_EQ(sends_done, kSizes.size());
  EXPECT_EQ(recvs_done, kSizes.size());
  EXPECT_TRUE(a.idle() && b.idle());
}

// Two sockets, one of them with small buffers so that its stripe of a transfer finishes
// after the other's: the count must wait for the slower stream, whichever it is.
void check_tcp(int slow_stream) {
  std::vector<net::Fd> sa, sb;
  for (int i = 0; i < 2; ++i) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    if (i == slow_stream) {
      const int small = 4096;
      ASSERT_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
      ASSERT_EQ(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    }
    sa.emplace_back(sv[0]);
    sb.emplace_back(sv[1]);
  }
  TcpLink a(1, std::move(sa), 1 << 20), b(0, std::move(sb), 1 << 20);
  check_counts(a, b);
}

TEST(LinkOutstanding, TcpCountsStripedTransfersFirstStreamSlow) { check_tcp(0); }
TEST(LinkOutstanding, TcpCountsStripedTransfersSecondStreamSlow) { check_tcp(1); }

TEST(LinkOutstanding, ShmCounts) {
  const std::string base = "/strata-outstanding-test-" + std::to_string(getpid());
  auto a_seg = ShmSegment::create(base + "-a", 1, 64 << 10);
  auto b_seg = ShmSegment::create(base + "-b", 1, 64 << 10);
  a_seg->unlink();
  b_seg->unlink();
  ShmLink a(1, b_seg->ring(0), a_seg->ring(0), b_seg, a_seg), b(0, a_seg->ring(0), b_seg->ring(0), a_seg, b_seg);
  check_counts(a, b);
}

}  // namespace
}  // namespace strata
