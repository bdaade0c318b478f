#include "transports/staging/staging_link.hpp"

#include <algorithm>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

StagingLink::StagingLink(int peer, Link& host, size_t chunk_bytes, size_t slots)
    : Link(peer), host_(host), chunk_(chunk_bytes), nslots_(slots) {
  declare_caps({.forwards_reductions = false,
                .streaming_stores = false,
                .memory = {MemoryKind::device},
                .needs_registration = false});
}

StagingLink::~StagingLink() {
  bool host_holds_slots = false;  // after a failure the host link may still read or fill one
  for (const Pipe* p : {&sends_, &recvs_})
    for (const Chunk& c : p->chunks) host_holds_slots |= c.on_host;
  host_holds_slots &= !host_.idle();
  for (Pipe* p : {&sends_, &recvs_}) {
    if (!p->slots) continue;
    try {
      p->stream.synchronize();
      if (host_holds_slots) {
        STRATA_WARN("staging link to rank %d: its pinned slots stay allocated (the host link still holds some)", peer());
      } else {
        p->stream.backend().memory().host_free(p->slots);
      }
    } catch (const Error& e) {
      STRATA_WARN("staging link to rank %d: its slots could not be released: %s", peer(), e.what());
    }
  }
}

void StagingLink::post_send(const void* buf, size_t bytes) {
  sends_.transfers.push_back({const_cast<char*>(static_cast<const char*>(buf)), bytes, {}, (bytes + chunk_ - 1) / chunk_});
}

void StagingLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  recvs_.transfers.push_back({static_cast<char*>(buf), bytes, reduce, (bytes + chunk_ - 1) / chunk_});
}

uint64_t StagingLink::done_of(uint64_t posted, size_t outstanding) { return posted - std::min<uint64_t>(posted, outstanding); }

void StagingLink::prepare() {
  for (Pipe* p : {&sends_, &recvs_}) {
    p->stream.prepare(nslots_);  // a chunk in flight holds one point
    if (!p->slots) p->slots = static_cast<char*>(p->stream.backend().memory().host_alloc(nslots_ * chunk_));
  }
}

StagingLink::Chunk* StagingLink::begin_chunk(Pipe& p) {
  if (p.chunks.size() >= nslots_) return nullptr;
  // Transfers wholly begun are at the front: at most one per slot (and empty ones).
  auto t = std::find_if(p.transfers.begin(), p.transfers.end(), [](const Transfer& x) { return x.begun < x.chunks; });
  if (t == p.transfers.end()) return nullptr;
  if (!p.slots) p.slots = static_cast<char*>(p.stream.backend().memory().host_alloc(nslots_ * chunk_));
  const size_t offset = t->begun++ * chunk_;
  char* slot = p.slots + (p.next_slot++ % nslots_) * chunk_;  // chunks leave in order: this one is free
  p.chunks.push_back({&*t, offset, std::min(chunk_, t->bytes - offset), slot});
  return &p.chunks.back();
}

bool StagingLink::pop_finished(Pipe& p) {
  bool moved = false;
  while (!p.transfers.empty() && p.transfers.front().finished == p.transfers.front().chunks) {
    p.transfers.pop_front();
    moved = true;
  }
  return moved;
}

bool StagingLink::advance_sends(uint64_t host_done) {
  Pipe& p = sends_;
  bool moved = false;
  // Slots the host link has sent are free.
  while (!p.chunks.empty() && p.chunks.front().on_host && p.chunks.front().host_index < host_done) {
    ++p.chunks.front().transfer->finished;
    p.chunks.pop_front();
    moved = true;
  }
  // Chunks now in their slot go to the host link, in order.
  for (Chunk& c : p.chunks) {
    if (c.on_host) continue;
    if (!p.stream.done(c.ticket)) break;
    host_.post_send(c.slot, c.bytes);
    c.host_index = p.host_posted++;
    c.on_host = true;
    moved = true;
  }
  // Free slots take the next chunks out of device memory.
  while (Chunk* c = begin_chunk(p)) {
    p.stream.exec().copy(c->slot, c->transfer->buf + c->offset, c->bytes, p.stream.stream());
    c->ticket = p.stream.mark();
    moved = true;
  }
  return pop_finished(p) || moved;
}

bool StagingLink::advance_recvs(uint64_t host_done) {
  Pipe& p = recvs_;
  bool moved = false;
  // Slots whose bytes the stream has moved on are free.
  while (!p.chunks.empty() && p.chunks.front().ticket && p.stream.done(p.chunks.front().ticket)) {
    ++p.chunks.front().transfer->finished;
    p.chunks.pop_front();
    moved = true;
  }
  // Chunks the host link delivered go into device memory, in order: a copy, or one
  // reduction reading the slot.
  for (Chunk& c : p.chunks) {
    if (c.ticket) continue;
    if (c.host_index >= host_done) break;
    const Transfer& t = *c.transfer;
    char* dst = t.buf + c.offset;
    if (t.reduce) {
      const void* srcs[2] = {t.reduce.local ? t.reduce.local + c.offset : dst, c.slot};
      p.stream.exec().reduce(dst, srcs, 2, c.bytes / t.reduce.elem_size, t.reduce.type, t.reduce.op, p.stream.stream());
    } else {
      p.stream.exec().copy(dst, c.slot, c.bytes, p.stream.stream());
    }
    c.ticket = p.stream.mark();
    moved = true;
  }
  // Free slots receive the next chunks.
  while (Chunk* c = begin_chunk(p)) {
    host_.post_recv(c->slot, c->bytes, {});
    c->host_index = p.host_posted++;
    c->on_host = true;
    moved = true;
  }
  return pop_finished(p) || moved;
}

bool StagingLink::progress() {
  bool moved = host_.progress();
  const Outstanding o = host_.outstanding();
  const uint64_t posted = sends_.host_posted + recvs_.host_posted;
  moved |= advance_sends(done_of(sends_.host_posted, o.sends));
  moved |= advance_recvs(done_of(recvs_.host_posted, o.recvs));
  if (sends_.host_posted + recvs_.host_posted != posted) moved |= host_.progress();  // what was just posted starts moving
  return moved;
}

void StagingLink::wait_fds(std::vector<pollfd>& out) const {
  if (!sends_.stream.busy() && !recvs_.stream.busy()) host_.wait_fds(out);
}

}  // namespace strata
