#include "transports/shm/shm_link.hpp"

#include <cstring>

#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "transports/streaming.hpp"

namespace strata {

ShmLink::ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg,
                 std::shared_ptr<ShmSegment> in_seg)
    : Link(peer),
      out_seg_(std::move(out_seg)),
      in_seg_(std::move(in_seg)),
      out_(out),
      in_(in, static_cast<size_t>(settings::integer("STRATA_SHM_STREAM_BYTES"))),
      zerocopy_(peer, *out_seg_, out_, in_) {
  // FIFO writes of 4 KiB or more stream when asked.
  declare_caps({.forwards_reductions = true,
                .streaming_stores = true,
                .memory = {MemoryKind::host},
                .needs_registration = false});
  forward_tmp_.resize(256 << 10);  // in L2: smaller pieces ran slower (docs/benchmarks.md, "Measured choices")
}

void ShmLink::abandon() { zerocopy_.close_landings(); }

ShmLink::~ShmLink() { abandon(); }

namespace {
ShmMode by_size(size_t bytes) { return bytes <= ShmInline::kMaxBytes ? ShmMode::lines : ShmMode::fifo; }
}  // namespace

void ShmLink::post_send(const void* buf, size_t bytes) {
  ShmTransfer t{const_cast<char*>(static_cast<const char*>(buf)), bytes};
  t.number = sends_posted_++;
  zerocopy_.choose_send(t, by_size(bytes));
  sends_.push_back(t);
}

void ShmLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  ShmTransfer t{static_cast<char*>(buf), bytes, 0, reduce};
  t.mode = reduce.forward && bytes > ShmInline::kMaxBytes ? ShmMode::forward : by_size(bytes);
  zerocopy_.choose_recv(t);
  t.number = recvs_posted_++;
  if (reduce.forward) {
    ShmTransfer slot{t.buf, bytes};
    slot.forward_slot = true;
    slot.number = sends_posted_++;
    zerocopy_.choose_send(slot, by_size(bytes));
    t.forward = sends_.push_back(slot);
  }
  recvs_.push_back(t);
  if (recvs_.size() <= ShmRing::kLandings) zerocopy_.offer_landing(recvs_.at(recvs_.front_index() + recvs_.size() - 1));
}

ShmStep ShmLink::send_lines(ShmTransfer& t) {
  if (t.forward_slot && t.ready < t.len) return {false, false};  // once the receive has reduced it all
  const bool put = out_.put_lines(t.buf, t.len);
  return {put, put};
}

ShmStep ShmLink::send_fifo(ShmTransfer& t) {
  bool moved = false;
  if (t.forward_slot) {
    // What the receive reduced while this was not yet next (or the FIFO was full), from
    // the destination; the receive forwards the rest itself, from cache.
    if (t.done < t.ready) {
      const size_t n = out_.put(t.buf + t.done, t.ready - t.done, t.done == 0, false, streaming_stores());
      t.done += n;
      moved = n > 0;
    }
    return {moved, t.done == t.len};
  }
  while (t.done < t.len) {
    const size_t n = out_.put_piece(t.buf, t.len, t.done, streaming_stores());
    if (n == 0) break;
    t.done += n;
    moved = true;
  }
  return {moved, t.done == t.len};
}

ShmStep ShmLink::send_step(ShmTransfer& t) {
  switch (t.mode) {
    case ShmMode::lines: return send_lines(t);
    case ShmMode::fifo: return send_fifo(t);
    case ShmMode::mapped: return zerocopy_.send_mapped(t);
    case ShmMode::pushed: return zerocopy_.send_pushed(t);
    case ShmMode::forward: break;
  }
  throw InternalError("shm: a send in a receive's mode");
}

bool ShmLink::send_some() {
  bool moved = false;
  while (!sends_.empty()) {
    ShmTransfer& t = sends_.front();
    if (t.headed && !t.announced && t.mode != ShmMode::pushed) {  // a push writes its header when done
      if (!zerocopy_.write_header(t)) break;
      moved = true;
    }
    const ShmStep s = send_step(t);
    moved |= s.moved;
    if (!s.done) break;
    sends_.pop_front();
  }
  return moved;
}

ShmStep ShmLink::recv_lines(ShmTransfer& t) {
  if (!in_.get_lines(t.buf, t.len, t.reduce)) return {false, false};
  if (ShmTransfer* f = forward_of(t)) f->ready = t.len;
  return {true, true};
}

// One piece per call, so the engine keeps every other link of the round moving too.
ShmStep ShmLink::recv_fifo(ShmTransfer& t) {
  const size_t n = in_.read(t.buf, t.len, t.done, t.reduce);
  t.done += n;
  return {n > 0, t.done == t.len};
}

ShmStep ShmLink::recv_forward(ShmTransfer& t) {
  bool moved = false;
  while (t.done < t.len && reduce_forward(t)) moved = true;
  return {moved, t.done == t.len};
}

// A forwarding receive: reduce a cache-sized piece, put it in the peer's FIFO when the
// forward is the next send and has caught up, and write it to the destination.
bool ShmLink::reduce_forward(ShmTransfer& t) {
  const Reduction& r = t.reduce;
  const ShmConsumer::Span s = in_.readable(t.len, t.done, r.elem_size, forward_tmp_.size());
  if (s.n == 0) return false;
  const uint64_t n = s.n;
  ShmTransfer& f = sends_.at(t.forward);  // stays put: sends_ only pops until f is done
  // The sends before the forward (and its header), so it can go from cache.
  if (sends_.front_index() != t.forward || (f.headed && !f.announced)) send_some();
  char* tmp = forward_tmp_.data();
  in_.ring()->runs(
      s.start, n, [&](const char* ring, uint64_t off, uint64_t len) __attribute__((always_inline)) {
        r.fn(tmp + off, r.local + t.done + off, ring, len / r.elem_size);
      });
  in_.consumed(s);
  if (sends_.front_index() == t.forward && f.done == t.done && (!f.headed || f.announced) && f.mode == ShmMode::fifo)
    f.done += out_.put(tmp, n, f.done == 0, false, streaming_stores());
  // Nothing reads the destination again (the forward went from tmp): non-temporal stores
  // skip reading its lines from memory first, whatever the size.
  if (in_.streams_any()) copy_streaming(t.buf + t.done, tmp, n);
  else std::memcpy(t.buf + t.done, tmp, n);
  t.done += n;
  f.ready = t.done;
  return true;
}

ShmStep ShmLink::recv_step(ShmTransfer& t) {
  switch (t.mode) {
    case ShmMode::lines: return recv_lines(t);
    case ShmMode::fifo: return recv_fifo(t);
    case ShmMode::forward: return recv_forward(t);
    case ShmMode::mapped: return zerocopy_.recv_mapped(t, forward_of(t));
    case ShmMode::pushed: return zerocopy_.recv_pushed(t);
  }
  throw InternalError("shm: a receive in no mode");
}

bool ShmLink::recv_some() {
  bool moved = false;
  while (!recvs_.empty()) {
    ShmTransfer& t = recvs_.front();
    if (t.headed && !t.announced) {
      if (!zerocopy_.read_header(t)) break;
      moved = true;
    }
    const ShmStep s = recv_step(t);
    moved |= s.moved;
    if (!s.done) break;
    recvs_.pop_front();
    // The receive that has just become the kLandings-th oldest (each is offered once: when
    // posted, or when it reaches that place).
    if (recvs_.size() >= ShmRing::kLandings)
      zerocopy_.offer_landing(recvs_.at(recvs_.front_index() + ShmRing::kLandings - 1));
  }
  return moved;
}

bool ShmLink::progress() {
  bool moved = send_some();
  moved |= recv_some();
  return moved;
}

}  // namespace strata
