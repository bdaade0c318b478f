#include "transports/tcp/tcp_link.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "strata/error.hpp"

namespace strata {

TcpLink::TcpLink(int peer, std::vector<net::Fd> sockets, size_t staging_bytes) : Link(peer) {
  declare_caps({.forwards_reductions = false,
                .streaming_stores = false,
                .memory = {MemoryKind::host},
                .needs_registration = false});
  streams_.resize(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) {
    net::set_nonblocking(sockets[i].get());
    streams_[i].fd = std::move(sockets[i]);
    streams_[i].staging.resize(staging_bytes);
  }
}

void TcpLink::post_send(const void* buf, size_t bytes) {
  int n = static_cast<int>(streams_.size());
  for (int i = 0; i < n; ++i) {
    Stripe s = stripe_part(bytes, n, i);
    if (s.bytes)
      streams_[i].sends.push_back({const_cast<char*>(static_cast<const char*>(buf)) + s.offset, s.bytes, 0, {}, sends_posted_});
  }
  ++sends_posted_;
}

void TcpLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  int n = static_cast<int>(streams_.size());
  for (int i = 0; i < n; ++i) {
    Stripe s = stripe_part(bytes, n, i);
    if (s.bytes)
      streams_[i].recvs.push_back(
          {static_cast<char*>(buf) + s.offset, s.bytes, 0, reduce ? reduce.from(s.offset) : Reduction{}, recvs_posted_});
  }
  ++recvs_posted_;
}

void TcpLink::fail(const char* what, int err) const {
  std::string msg = "rank " + std::to_string(peer()) + " is unreachable: tcp " + what;
  msg += err ? std::string(" failed: ") + std::strerror(err) : std::string(": connection closed by the peer");
  throw PeerError(peer(), msg);
}

bool TcpLink::send_some(Stream& s) {
  bool moved = false;
  while (!s.sends.empty()) {
    Piece& p = s.sends.front();
    ssize_t r = ::send(s.fd.get(), p.buf + p.done, p.len - p.done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      fail("send", errno);
    }
    moved = true;
    p.done += static_cast<size_t>(r);
    if (p.done < p.len) break;
    s.sends.pop_front();
  }
  return moved;
}

bool TcpLink::recv_some(Stream& s) {
  bool moved = false;
  while (!s.recvs.empty()) {
    Piece& p = s.recvs.front();
    ssize_t r;
    if (!p.reduce) {
      r = ::recv(s.fd.get(), p.buf + p.done, p.len - p.done, MSG_DONTWAIT);
    } else {
      // Never read past this piece: the bytes after it belong to the next transfer.
      size_t want = std::min(s.staging.size() - s.staged, p.len - p.done - s.staged);
      r = ::recv(s.fd.get(), s.staging.data() + s.staged, want, MSG_DONTWAIT);
    }
    if (r == 0) fail("recv", 0);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      fail("recv", errno);
    }
    moved = true;
    if (!p.reduce) {
      p.done += static_cast<size_t>(r);
    } else {
      s.staged += static_cast<size_t>(r);
      size_t whole = s.staged / p.reduce.elem_size * p.reduce.elem_size;
      p.reduce.apply(p.buf, p.done, s.staging.data(), whole);
      p.done += whole;
      s.staged -= whole;
      if (s.staged) std::memmove(s.staging.data(), s.staging.data() + whole, s.staged);
    }
    if (p.done < p.len) continue;
    s.recvs.pop_front();
  }
  return moved;
}

bool TcpLink::progress() {
  bool moved = false;
  for (Stream& s : streams_) {
    moved |= send_some(s);
    moved |= recv_some(s);
  }
  return moved;
}

bool TcpLink::idle() const {
  for (const Stream& s : streams_)
    if (!s.sends.empty() || !s.recvs.empty()) return false;
  return true;
}

uint64_t TcpLink::first_incomplete(bool sends) const {
  uint64_t first = sends ? sends_posted_ : recvs_posted_;
  for (const Stream& s : streams_) {
    const std::deque<Piece>& q = sends ? s.sends : s.recvs;
    if (!q.empty()) first = std::min(first, q.front().transfer);
  }
  return first;
}

Link::Outstanding TcpLink::outstanding() const {
  return {static_cast<size_t>(sends_posted_ - first_incomplete(true)), static_cast<size_t>(recvs_posted_ - first_incomplete(false))};
}

void TcpLink::wait_fds(std::vector<pollfd>& out) const {
  for (const Stream& s : streams_) {
    short ev = static_cast<short>((s.sends.empty() ? 0 : POLLOUT) | (s.recvs.empty() ? 0 : POLLIN));
    if (ev) out.push_back({s.fd.get(), ev, 0});
  }
}

}  // namespace strata
