// Shared-memory transport between ranks of one host: a link reads what its peer wrote into
// our segment and writes into the peer's (shm_segment.hpp). Each transfer moves by one
// ShmMode (shm_transfer.hpp): small ones through the inline ring, others through the FIFO
// (shm_ring.hpp), large ones in place or into the receive's landing (shm_zerocopy.hpp); a
// reducing receive may forward its result to the peer as it reduces (this file).
#pragma once

#include <memory>
#include <vector>

#include "transports/shm/shm_ring.hpp"
#include "transports/shm/shm_segment.hpp"
#include "transports/shm/shm_transfer.hpp"
#include "transports/shm/shm_zerocopy.hpp"
#include "transports/transport.hpp"

namespace strata {

class ShmLink final : public Link {
 public:
  // `out` lives in the peer's segment, `in` in ours; both segments stay mapped while the
  // link lives.
  ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg, std::shared_ptr<ShmSegment> in_seg);
  ~ShmLink() override;
  const char* name() const override { return "shm"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  // Closes our landings: a peer that still reduces (stopped, then resumed) must not write
  // into buffers the program has its own again once the call failed here.
  void abandon() override;
  // A forwarding receive's send counts as a send (the engine posts none on device memory).
  Outstanding outstanding() const override { return {sends_.size(), recvs_.size()}; }

 private:
  bool send_some();
  bool recv_some();
  // One step of the transfer at the front, by its mode.
  ShmStep send_step(ShmTransfer& t);
  ShmStep recv_step(ShmTransfer& t);
  ShmStep send_lines(ShmTransfer& t);
  ShmStep send_fifo(ShmTransfer& t);
  ShmStep recv_lines(ShmTransfer& t);
  ShmStep recv_fifo(ShmTransfer& t);
  ShmStep recv_forward(ShmTransfer& t);
  // A forwarding receive's next cache-sized piece; false when none has arrived.
  bool reduce_forward(ShmTransfer& t);
  ShmTransfer* forward_of(ShmTransfer& t) {
    return t.forward == ShmTransfer::kNoForward ? nullptr : &sends_.at(t.forward);
  }

  std::shared_ptr<ShmSegment> out_seg_, in_seg_;
  ShmProducer out_;
  ShmConsumer in_;
  ShmZeroCopy zerocopy_;
  TransferQueue<ShmTransfer> sends_, recvs_;
  std::vector<char> forward_tmp_;  // a forwarding receive's reduced piece (cache-sized)
  uint64_t sends_posted_ = 0, recvs_posted_ = 0;
};

}  // namespace strata
