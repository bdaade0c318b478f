#include "transports/shm/shm_ring.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "transports/streaming.hpp"

namespace strata {

namespace {
std::atomic_ref<uint64_t> line_flag(char* line) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(line));
}
}  // namespace

ShmProducer::ShmProducer(ShmRing* ring) : ring_(ring) {
  // The owner populates the ring in its own mapping; a kernel without MADV_POPULATE_WRITE
  // (before 5.14) leaves it to the first transfers.
  (void)madvise(ring_, ShmRing::bytes(ring_->capacity), MADV_POPULATE_WRITE);
  head_ = ring_->head.load(std::memory_order_relaxed);
  peer_tail_ = ring_->tail.load(std::memory_order_relaxed);
}

size_t ShmProducer::put(const char* bytes, size_t want, bool starts, bool whole, bool stream) {
  const uint64_t cap = ring_->capacity;
  uint64_t start = starts ? ShmRing::message_start(head_) : head_;
  // The consumer's tail is read only when the last value seen leaves too little room:
  // reading it every message would pull its cache line over from the consumer's core
  // (and make the consumer's next store to it miss) for every small message.
  uint64_t used = start - peer_tail_;
  if (used >= cap || cap - used < want) {
    peer_tail_ = ring_->tail.load(std::memory_order_acquire);
    used = start - peer_tail_;
  }
  if (used >= cap) return 0;
  uint64_t n = std::min<uint64_t>(cap - used, want);
  if (whole && n < want) return 0;
  stream = stream && n >= 4096;
  ring_->runs(
      start, n, [&](char* to, uint64_t off, uint64_t len) __attribute__((always_inline)) {
        if (stream) copy_streaming(to, bytes + off, len);
        else std::memcpy(to, bytes + off, len);
      });
  head_ = start + n;
  ring_->head.store(head_, std::memory_order_release);
  return n;
}

size_t ShmProducer::put_piece(const char* src, size_t len, size_t done, bool stream) {
  // Published a piece at a time, so the receiver starts copying out while the rest goes
  // in (docs/benchmarks.md, "Measured choices").
  constexpr size_t kPieceBytes = 256 << 10;
  return put(src + done, std::min(kPieceBytes, len - done), done == 0, false, stream);
}

bool ShmProducer::put_lines(const char* src, size_t len) {
  constexpr uint64_t cap = ShmInline::kRingBytes, data = ShmInline::kLineData;
  const uint64_t bytes = ShmInline::lines(len) * 64;
  if (inline_head_ + bytes - peer_inline_tail_ > cap) {
    peer_inline_tail_ = ring_->inline_tail.load(std::memory_order_acquire);
    if (inline_head_ + bytes - peer_inline_tail_ > cap) return false;
  }
  char* lines = ring_->inline_data();
  for (uint64_t off = 0, pos = inline_head_; off < len; off += data, pos += 64) {
    char* line = ShmInline::line(lines, pos);
    std::memcpy(line + 8, src + off, std::min(data, len - off));
    line_flag(line).store(pos + 1, std::memory_order_release);
  }
  inline_head_ += bytes;
  return true;
}

ShmConsumer::ShmConsumer(ShmRing* ring, size_t stream_min)
    : ring_(ring), tail_(ring->tail.load(std::memory_order_relaxed)), stream_min_(stream_min) {
  if (stream_min_) stream_tmp_.resize(64 << 10);
}

void ShmConsumer::deliver(char* dst, size_t len, size_t off, const char* src, size_t n, const Reduction& reduce,
                          bool may_stream_reduce) {
  const bool stream = streams(len);
  if (reduce && stream && may_stream_reduce && reduce.local != dst)
    reduce_streaming(reduce, dst, off, src, n, stream_tmp_);
  else if (reduce) reduce.apply(dst, off, src, n);
  else if (stream) copy_streaming(dst + off, src, n);
  else std::memcpy(dst + off, src, n);
}

size_t ShmConsumer::read(char* dst, size_t len, size_t done, const Reduction& reduce) {
  const Span s = readable(len, done, reduce ? reduce.elem_size : 1, len);
  if (s.n == 0) return 0;
  ring_->runs(
      s.start, s.n, [&](const char* from, uint64_t off, uint64_t n) __attribute__((always_inline)) {
        deliver(dst, len, done + off, from, n, reduce);
      });
  consumed(s);
  return s.n;
}

bool ShmConsumer::get_lines(char* dst, size_t len, const Reduction& reduce) {
  constexpr uint64_t data = ShmInline::kLineData;
  char* lines = ring_->inline_data();
  const uint64_t end = inline_tail_ + ShmInline::lines(len) * 64;
  for (uint64_t pos = inline_tail_; pos < end; pos += 64)
    if (line_flag(ShmInline::line(lines, pos)).load(std::memory_order_acquire) != pos + 1) return false;
  // 56 is a multiple of every element size: no element straddles two lines.
  for (uint64_t off = 0, pos = inline_tail_; off < len; off += data, pos += 64) {
    const char* line = ShmInline::line(lines, pos) + 8;
    const size_t n = std::min(data, len - off);
    if (reduce) reduce.apply(dst, off, line, n);
    else std::memcpy(dst + off, line, n);
  }
  inline_tail_ = end;
  ring_->inline_tail.store(inline_tail_, std::memory_order_release);
  return true;
}

}  // namespace strata
