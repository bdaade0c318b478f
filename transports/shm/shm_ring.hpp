// Moving bytes through a ShmRing: its producer (the sending rank, in the receiver's
// segment) and its consumer (the receiving rank). The FIFO carries a message in pieces,
// the inline ring a small message whole; each side keeps its own positions and reads the
// other's only when it has to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/shm/shm_segment.hpp"
#include "transports/transport.hpp"

namespace strata {

class ShmProducer {
 public:
  // Maps `ring`'s pages here now rather than page by page in the first transfers.
  explicit ShmProducer(ShmRing* ring);
  ShmRing* ring() const { return ring_; }
  // Up to `n` bytes of one message into the FIFO; `starts` aligns the message's start,
  // `whole` writes all or nothing, `stream` uses non-temporal stores for 4 KiB or more.
  // Returns the bytes written.
  size_t put(const char* bytes, size_t n, bool starts, bool whole, bool stream);
  // The next piece of a message `done` bytes into its `len`.
  size_t put_piece(const char* src, size_t len, size_t done, bool stream);
  // A small message whole into the inline ring; false when there is no room yet.
  bool put_lines(const char* src, size_t len);

 private:
  ShmRing* ring_;
  uint64_t head_;                  // our copy of ring_->head (only we write it)
  uint64_t peer_tail_;             // ring_->tail as last read: the room it leaves is surely free
  uint64_t inline_head_ = 0;       // our position in the inline ring
  uint64_t peer_inline_tail_ = 0;  // ring_->inline_tail as last read
};

class ShmConsumer {
 public:
  // Receives of at least `stream_min` bytes are written with non-temporal stores (0: never).
  ShmConsumer(ShmRing* ring, size_t stream_min);
  ShmRing* ring() const { return ring_; }

  // The next piece of an incoming message `done` bytes into its `len`: where it starts in
  // the stream and how much of it has arrived (n == 0: nothing yet), at most `most` bytes
  // and whole elements of `elem` bytes unless it ends the message.
  struct Span {
    uint64_t start, n;
  };
  [[gnu::always_inline]] Span readable(size_t len, size_t done, size_t elem, size_t most) {
    const uint64_t start = done == 0 ? ShmRing::message_start(tail_) : tail_;
    const uint64_t head = ring_->head.load(std::memory_order_acquire);
    if (head <= start) return {start, 0};
    uint64_t n = std::min<uint64_t>({head - start, len - done, most});
    // A reduction consumes whole elements; the rest waits for the producer. Transfers
    // start aligned and the capacity is a multiple of 64, so no element straddles the wrap.
    if (elem > 1 && done + n < len) n -= n % elem;
    return {start, n};
  }
  // Hands the span's bytes back to the producer.
  [[gnu::always_inline]] void consumed(const Span& s) {
    tail_ = s.start + s.n;
    ring_->tail.store(tail_, std::memory_order_release);
  }
  // What has arrived of a message, copied or reduced into `dst`; returns the bytes read.
  size_t read(char* dst, size_t len, size_t done, const Reduction& reduce);
  // A small message whole out of the inline ring; false while it has not all arrived.
  bool get_lines(char* dst, size_t len, const Reduction& reduce);
  // `n` incoming bytes at `src` into a receive of `len` at `dst`, `off` bytes in: copied or
  // reduced, with non-temporal stores when the receive is large (a reduction streams only
  // out of place and when `may_stream_reduce`).
  void deliver(char* dst, size_t len, size_t off, const char* src, size_t n, const Reduction& reduce,
               bool may_stream_reduce = true);
  bool streams(size_t len) const { return stream_min_ && len >= stream_min_; }
  bool streams_any() const { return stream_min_ != 0; }

 private:
  ShmRing* ring_;
  uint64_t tail_;             // our copy of ring_->tail (only we write it)
  uint64_t inline_tail_ = 0;  // our position in the inline ring
  size_t stream_min_;
  std::vector<char> stream_tmp_;  // a streamed reduction's piece, before it is written out
};

}  // namespace strata
