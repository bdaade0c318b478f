// The transport interface: a Link moves bytes between this rank and one peer.
//
// A link is two ordered byte streams (one each way). post_send/post_recv queue a
// transfer; transfers in one direction complete in the order they were posted, so the
// n-th send on one side matches the n-th receive of the same size on the other.
// progress() moves whatever it can without blocking. A receive may carry a reduction:
// the incoming bytes are then combined into the destination (dst = dst op incoming)
// instead of overwriting it, which lets a transport reduce straight from its own
// buffers. Transports know nothing about collectives.
#pragma once

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace strata {

using ReduceFn = void (*)(void* dst, const void* src, size_t count);

class Link {
 public:
  virtual ~Link() = default;
  virtual const char* name() const = 0;
  int peer() const { return peer_; }

  virtual void post_send(const void* buf, size_t bytes) = 0;
  // reduce == nullptr: copy; else `bytes` is a multiple of elem_size.
  virtual void post_recv(void* buf, size_t bytes, ReduceFn reduce, size_t elem_size) = 0;
  // Returns true if any byte moved. Throws PeerError when the peer is gone.
  virtual bool progress() = 0;
  // Nothing posted is outstanding.
  virtual bool idle() const = 0;
  // File descriptors worth sleeping on while this link waits (none for shared memory).
  virtual void wait_fds(std::vector<pollfd>& out) const {}

 protected:
  explicit Link(int peer) : peer_(peer) {}

 private:
  int peer_;
};

// Cuts a transfer into `parts` pieces (64-byte aligned) so several sockets can carry it;
// sender and receiver compute the same cut from the same size. Small transfers stay whole.
struct Stripe {
  size_t offset, bytes;
};
inline Stripe stripe_part(size_t total, int parts, int i) {
  constexpr size_t kMinStriped = 64 << 10;
  if (total < kMinStriped || parts <= 1) return i == 0 ? Stripe{0, total} : Stripe{total, 0};
  size_t per = ((total + parts - 1) / parts + 63) & ~size_t(63);
  size_t begin = std::min(total, per * i), end = std::min(total, per * (i + 1));
  return {begin, end - begin};
}

}  // namespace strata
