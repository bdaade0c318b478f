// The transport interface: a Link moves bytes between this rank and one peer.
//
// A link is two ordered byte streams (one each way). post_send/post_recv queue a
// transfer; transfers in one direction complete in the order they were posted, so the
// n-th send on one side matches the n-th receive of the same size on the other.
// progress() moves whatever it can without blocking. A receive may carry a reduction:
// the incoming bytes are then combined with a local operand into the destination
// (dst = local op incoming) instead of overwriting it, which lets a transport reduce
// straight from its own buffers, and the local operand may be another buffer (the
// caller's input) so nobody copies it into dst first. Transports know nothing about
// collectives. A reducing receive may also forward its result back to the peer as it is
// reduced (shared memory does), which saves reading it again to send it.
#pragma once

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ground/memory_kind.hpp"
#include "ground/reduce.hpp"  // ReduceFn: dst = a op b
#include "strata/types.hpp"

namespace strata {

// What a reducing receive does with its bytes. Empty (default): a plain receive. `type` and
// `op` say how; host links reduce with `fn` (the host kernel for them), a link that launches
// kernels of its own (device memory) by `type` and `op` and has no `fn`.
struct Reduction {
  ReduceFn fn = nullptr;
  size_t elem_size = 1;
  const char* local = nullptr;  // the local operand: the destination itself, or disjoint from it
  bool forward = false;         // send the reduced bytes back to the peer (LinkCaps::forwards_reductions)
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  bool reduces = false;
  // A reduction on host memory, by `fn`.
  static Reduction on_host(ReduceFn fn, size_t elem_size, const char* local, bool forward,
                           DataType type = DataType::uint8, ReduceOp op = ReduceOp::sum) {
    return {fn, elem_size, local, forward, type, op, true};
  }
  // A reduction on device memory: the link's own kernel for `type` and `op`.
  static Reduction on_device(DataType type, ReduceOp op, size_t elem_size, const char* local, bool forward) {
    return {nullptr, elem_size, local, forward, type, op, true};
  }
  explicit operator bool() const { return reduces; }
  // The same reduction for the part of the receive that starts `off` bytes in.
  Reduction from(size_t off) const {
    return {fn, elem_size, local ? local + off : nullptr, forward, type, op, reduces};
  }
  // Reduces `bytes` of incoming data that belong `off` bytes into the receive at `dst`.
  void apply(char* dst, size_t off, const void* incoming, size_t bytes) const {
    fn(dst + off, local + off, incoming, bytes / elem_size);
  }
};

// What a link can do, declared by each link's constructor (docs/transports.md, "Link
// contract"). Callers ask this record instead of asking the link one virtual at a time.
struct LinkCaps {
  // Reducing receives may forward (Reduction::forward): the reduced bytes then follow, on
  // this link's sending side, the sends posted before the receive, and precede those
  // posted after it.
  bool forwards_reductions = false;
  // Large copies into memory the peer reads may use non-temporal stores when asked
  // (Link::set_streaming_stores); elsewhere the request is ignored.
  bool streaming_stores = false;
  // Which memory kinds post_send/post_recv buffers may be.
  MemoryKinds memory{MemoryKind::host};
  // Buffers must be registered with the transport before they are posted. (No link asks
  // it yet: ibverbs copies through rings it registered itself.)
  bool needs_registration = false;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual const char* name() const = 0;
  int peer() const { return peer_; }
  const LinkCaps& caps() const { return caps_; }

  virtual void post_send(const void* buf, size_t bytes) = 0;
  // With a reduction, `bytes` is a multiple of its elem_size. It may forward only if
  // caps().forwards_reductions.
  virtual void post_recv(void* buf, size_t bytes, const Reduction& reduce) = 0;
  // Returns true if any byte moved. Throws PeerError when the peer is gone.
  virtual bool progress() = 0;
  // Nothing posted is outstanding.
  virtual bool idle() const = 0;
  // Large copies into memory the peer reads (shm's FIFO, ucx's mapped put slots) use
  // non-temporal stores from now on (core/store_chooser.hpp says when that pays). A flag
  // the link's copies read, not a virtual: every link that streams just records it, and
  // one without caps().streaming_stores keeps it off.
  void set_streaming_stores(bool on) { streaming_stores_ = on && caps_.streaming_stores; }
  // File descriptors worth sleeping on while this link waits (none for shared memory).
  virtual void wait_fds(std::vector<pollfd>& out) const {}
  // Makes now what a device link would make on first use (its stream, events, pinned
  // slots). Called on the caller's thread before a device call holds the user's stream: on
  // a GPU, a driver call that creates waits on locks that another thread's blocking call
  // (a copy to pageable memory on that held stream) keeps (seen on an H200).
  virtual void prepare() {}
  // The call whose transfers are posted failed and will never progress them: stop what
  // the peer could still do to this call's memory (the shm link's landings).
  virtual void abandon() {}

  // How many of the transfers posted so far, each way, have not completed: they complete
  // in order, so all but the newest that many are done. A link that wraps this one
  // (staging) reuses its buffers by it. A link that does not count says none while idle
  // and kAll (every one of them) otherwise, which is right but slower to reuse.
  struct Outstanding {
    size_t sends, recvs;
  };
  static constexpr size_t kAll = ~size_t(0);
  virtual Outstanding outstanding() const { return idle() ? Outstanding{0, 0} : Outstanding{kAll, kAll}; }

 protected:
  explicit Link(int peer) : peer_(peer) {}
  // Every link's constructor declares its record, once it knows it (some capabilities
  // depend on settings or on what the peer offered); never called later.
  void declare_caps(const LinkCaps& caps) { caps_ = caps; }
  bool streaming_stores() const { return streaming_stores_; }

 private:
  int peer_;
  LinkCaps caps_;
  bool streaming_stores_ = false;
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
