// TCP transport: one or more non-blocking sockets per peer; large transfers are striped.
#pragma once

#include <deque>
#include <vector>

#include "ground/socket.hpp"
#include "transports/transport.hpp"

namespace strata {

class TcpLink final : public Link {
 public:
  TcpLink(int peer, std::vector<net::Fd> sockets, size_t staging_bytes);
  const char* name() const override { return "tcp"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override;
  void wait_fds(std::vector<pollfd>& out) const override;
  Outstanding outstanding() const override;

 private:
  struct Piece {
    char* buf;
    size_t len, done;
    Reduction reduce;
    uint64_t transfer;  // which transfer of its direction (they are striped over the streams)
  };
  struct Stream {
    net::Fd fd;
    std::deque<Piece> sends, recvs;
    std::vector<char> staging;  // incoming bytes waiting to be reduced
    size_t staged = 0;
  };
  bool send_some(Stream& s);
  bool recv_some(Stream& s);
  [[noreturn]] void fail(const char* what, int err) const;

  // The transfers of each direction posted so far; the oldest one still in some stream
  // is the first not done.
  uint64_t first_incomplete(bool sends) const;
  uint64_t sends_posted_ = 0, recvs_posted_ = 0;
  std::vector<Stream> streams_;
};

}  // namespace strata
