#include "transports/ibverbs/ib_link.hpp"

#include <cstring>

#include "strata/error.hpp"

namespace strata::ibverbs {

IbLink::IbLink(int peer, std::vector<std::unique_ptr<QpOps>> qps, size_t chunk, uint32_t batch)
    : Link(peer), chunk_(chunk) {
  // User buffers are copied through rings registered at setup, so they need no registration.
  declare_caps({.forwards_reductions = false,
                .streaming_stores = false,
                .memory = {MemoryKind::host},
                .needs_registration = false});
  if (qps.empty()) throw InternalError("ibverbs: a link without queue pairs");
  for (auto& q : qps) {
    uint32_t rs = q->recv_slots();
    Pair p{nullptr, SendWindow(q->remote_slots()), SendWindow(q->send_slots()), RecvWindow(rs, batch), {}, 0};
    p.lengths.resize(rs);
    p.ops = std::move(q);
    pairs_.push_back(std::move(p));
  }
}

IbLink::~IbLink() = default;

void IbLink::post_send(const void* buf, size_t bytes) {
  char* p = const_cast<char*>(static_cast<const char*>(buf));
  for (size_t off = 0; off < bytes; off += chunk_) sends_.push_back({p + off, std::min(chunk_, bytes - off), {}, sends_posted_});
  ++sends_posted_;
}

void IbLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  char* p = static_cast<char*>(buf);
  for (size_t off = 0; off < bytes; off += chunk_)
    recvs_.push_back({p + off, std::min(chunk_, bytes - off), reduce ? reduce.from(off) : Reduction{}, recvs_posted_});
  ++recvs_posted_;
}

Link::Outstanding IbLink::outstanding() const {
  return {static_cast<size_t>(sends_posted_ - (sends_.empty() ? sends_posted_ : sends_.front().transfer)),
          static_cast<size_t>(recvs_posted_ - (recvs_.empty() ? recvs_posted_ : recvs_.front().transfer))};
}

void IbLink::fail(const Pair& p, const std::string& what) const {
  throw PeerError(peer(), "rank " + std::to_string(peer()) + " is unreachable: ibverbs on " + p.ops->where() + ": " + what);
}

bool IbLink::poll_all() {
  bool moved = false;
  Completion wc[32];
  for (Pair& p : pairs_) {
    int n = p.ops->poll(wc, 32);
    for (int i = 0; i < n; ++i) {
      const Completion& c = wc[i];
      if (!c.ok) fail(p, "work completion error: " + c.error);
      moved = true;
      switch (c.kind) {
        case Completion::write:
          if (!p.local.on_credit(p.local.consumed() + 1)) throw InternalError("ibverbs: more write completions than writes");
          break;
        case Completion::credit: p.in.on_report_done(); break;
        case Completion::recv: {
          uint32_t slot = static_cast<uint32_t>(p.in.arrived() % p.lengths.size());
          if (!p.in.on_arrival()) fail(p, "the peer overran the receive ring (flow-control violation)");
          p.lengths[slot] = c.imm;
          p.ops->post_recv();  // replaces the receive request this write consumed
          break;
        }
      }
    }
    if (!p.remote.on_credit(p.ops->read_credit())) fail(p, "the peer credited chunks that were never sent");
  }
  return moved;
}

bool IbLink::send_some() {
  bool moved = false;
  while (!sends_.empty()) {
    Pair& p = pairs_[send_seq_ % pairs_.size()];
    if (!p.remote.can_send() || !p.local.can_send()) break;
    Chunk& c = sends_.front();
    uint32_t local = p.local.next_slot(), remote = p.remote.next_slot();
    std::memcpy(p.ops->send_buf(local), c.buf, c.len);
    p.ops->post_write(local, remote, static_cast<uint32_t>(c.len));
    p.local.on_send();
    p.remote.on_send();
    sends_.pop_front();
    ++send_seq_;
    moved = true;
  }
  return moved;
}

bool IbLink::recv_some() {
  bool moved = false;
  while (!recvs_.empty()) {
    Pair& p = pairs_[recv_seq_ % pairs_.size()];
    if (!p.in.has_data()) break;
    Chunk& c = recvs_.front();
    uint32_t slot = p.in.next_slot();
    if (p.lengths[slot] != c.len)
      throw PeerError(peer(), "rank " + std::to_string(peer()) + " sent a chunk of " + std::to_string(p.lengths[slot]) +
                                  " bytes where " + std::to_string(c.len) +
                                  " were expected: mismatched send/receive sizes");
    const char* src = p.ops->recv_buf(slot);
    if (c.reduce) c.reduce.apply(c.buf, 0, src, c.len);
    else std::memcpy(c.buf, src, c.len);
    p.in.on_consume();
    recvs_.pop_front();
    ++recv_seq_;
    moved = true;
  }
  return moved;
}

bool IbLink::report_credit(bool force) {
  bool moved = false;
  for (Pair& p : pairs_)
    if (auto v = p.in.take_report(force)) {
      p.ops->post_credit(*v);
      moved = true;
    }
  return moved;
}

bool IbLink::progress() {
  bool moved = poll_all();
  moved |= recv_some();
  moved |= send_some();
  // With nothing left to receive, settle what is owed now rather than at the next batch.
  moved |= report_credit(recvs_.empty());
  return moved;
}

bool IbLink::idle() const {
  if (!sends_.empty() || !recvs_.empty()) return false;
  // Also wait for our writes to complete (the data is at the peer) and for credit owed to
  // be reported, so a sender blocked on this link gets it even if we post nothing more.
  for (const Pair& p : pairs_)
    if (p.local.in_flight() || p.in.owes() || p.in.report_in_flight()) return false;
  return true;
}

}  // namespace strata::ibverbs
