// Flow control of the ibverbs transport, as pure state machines (no device needed).
//
// The receiver of a queue pair owns a ring of `nslots` registered slots; the sender
// RDMA-writes chunk k into slot k % nslots (write with immediate, so the receiver gets a
// completion per chunk) and may have at most `nslots` chunks the receiver has not consumed
// yet: it never overruns a slot still holding data. The receiver reports how many chunks
// it has consumed so far (a cumulative count) by an RDMA write into the sender's credit
// word; one report is in flight at a time and later ones carry the newest count, so a
// lost race only delays credit, never corrupts it. A report is sent once `batch` chunks
// were consumed since the last one, and whenever the link would otherwise go idle with
// credit owed (see IbLink::idle), so a blocked sender always gets its credit back.
#pragma once

#include <cstdint>
#include <optional>

namespace strata::ibverbs {

// Sender side: how many chunks may be in the receiver's ring. Also used for the sender's
// own send ring (consumed = writes completed).
class SendWindow {
 public:
  explicit SendWindow(uint32_t nslots) : nslots_(nslots) {}
  bool can_send() const { return sent_ - consumed_ < nslots_; }
  uint32_t next_slot() const { return static_cast<uint32_t>(sent_ % nslots_); }
  // Returns false (and changes nothing) when the window is full.
  bool on_send() {
    if (!can_send()) return false;
    ++sent_;
    return true;
  }
  // The receiver's cumulative consumed count. Older (smaller) values are ignored; a value
  // beyond what was sent is a protocol violation: returns false.
  bool on_credit(uint64_t consumed) {
    if (consumed > sent_) return false;
    if (consumed > consumed_) consumed_ = consumed;
    return true;
  }
  uint64_t sent() const { return sent_; }
  uint64_t consumed() const { return consumed_; }
  uint64_t in_flight() const { return sent_ - consumed_; }
  uint32_t nslots() const { return nslots_; }

 private:
  uint32_t nslots_;
  uint64_t sent_ = 0, consumed_ = 0;
};

// Receiver side: arrivals into the ring, their consumption in order, and credit reports.
class RecvWindow {
 public:
  RecvWindow(uint32_t nslots, uint32_t batch) : nslots_(nslots), batch_(batch == 0 ? 1 : batch) {}
  // A chunk arrived. false: the sender overran the ring (a protocol violation).
  bool on_arrival() {
    if (arrived_ - consumed_ >= nslots_) return false;
    ++arrived_;
    return true;
  }
  bool has_data() const { return consumed_ < arrived_; }
  uint32_t next_slot() const { return static_cast<uint32_t>(consumed_ % nslots_); }
  // The oldest arrival was copied out; its slot is free. false if there was none.
  bool on_consume() {
    if (!has_data()) return false;
    ++consumed_;
    return true;
  }
  // Credit the sender is owed but has not been sent.
  bool owes() const { return consumed_ > reported_; }
  bool report_in_flight() const { return in_flight_; }
  // The count to write into the sender's credit word now, if a report is due: `force`
  // sends whatever is owed (the link is about to go idle), otherwise only a full batch.
  std::optional<uint64_t> take_report(bool force) {
    if (in_flight_ || !owes()) return std::nullopt;
    if (!force && consumed_ - reported_ < batch_) return std::nullopt;
    in_flight_ = true;
    reported_ = consumed_;
    return reported_;
  }
  void on_report_done() { in_flight_ = false; }
  uint64_t arrived() const { return arrived_; }
  uint64_t consumed() const { return consumed_; }
  uint64_t reported() const { return reported_; }

 private:
  uint32_t nslots_, batch_;
  uint64_t arrived_ = 0, consumed_ = 0, reported_ = 0;
  bool in_flight_ = false;
};

}  // namespace strata::ibverbs
