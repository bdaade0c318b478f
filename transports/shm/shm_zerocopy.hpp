// Zero-copy on shared memory (docs/transports.md, "Zero-copy"): a large transfer's bytes
// go around the FIFO. A transfer of at least the receiver's `zerocopy_min` starts with a
// ZeroCopyHeader in the FIFO, so the sender decides per message:
//   mapped 0: the bytes follow in the FIFO;
//   mapped 1: they stay in the sender's shareable host memory (ground/device/shared_host.hpp),
//     the allocation `id` open as `fd` in the sender; the receiver opens it through
//     /proc/<pid>/fd once, keeps it mapped (PeerMappings), copies or reduces straight from
//     it and then bumps `mapped_done`, on which the send completes;
//   mapped 2 (a forward, STRATA_SHM_ZEROCOPY_PUSH): the sender wrote the `length` bytes
//     into the receive's landing (ShmLanding) as it reduced them and bumps `pushes_done`
//     once they are all there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/peer_mappings.hpp"
#include "transports/shm/shm_ring.hpp"
#include "transports/shm/shm_transfer.hpp"

namespace strata {

struct ZeroCopyHeader {
  uint64_t mapped, fd, id, offset, length;
  uint64_t pad[3];
};
static_assert(sizeof(ZeroCopyHeader) == 64);

// One link's zero-copy side: what it publishes, the peer's allocations it holds mapped,
// and the steps of the mapped and pushed modes.
class ShmZeroCopy {
 public:
  // Publishes our threshold (STRATA_SHM_ZEROCOPY_BYTES, if the peer's files open here) in
  // the ring we receive on: the sender follows it, so the two ends always agree.
  ShmZeroCopy(int peer, const ShmSegment& peer_segment, ShmProducer& out, ShmConsumer& in);
  ~ShmZeroCopy();

  // A send's mode: headed when the receiver asks, mapped when its bytes lie in shareable
  // memory; otherwise `fallback`.
  void choose_send(ShmTransfer& t, ShmMode fallback) const;
  // A receive is headed when we ask; the header says how its bytes come (read_header).
  void choose_recv(ShmTransfer& t) const;
  // A receive into shareable memory offers the peer its destination (ShmLanding), once it
  // is among the kLandings oldest not done: a plan posts all its receives at once, and
  // those further back would overwrite the slots of those the peer is about to send.
  void offer_landing(ShmTransfer& t);
  // The send's header; false while the FIFO has no room or a mapped forward is not all reduced.
  bool write_header(ShmTransfer& t);
  // The receive's header, which sets its mode; false while it has not arrived.
  bool read_header(ShmTransfer& t);

  ShmStep send_mapped(ShmTransfer& t);
  ShmStep send_pushed(ShmTransfer& t);
  // One piece of a mapped receive (copied or reduced; with its forward `f`, pushed into
  // the peer's landing or left for the peer to read back).
  ShmStep recv_mapped(ShmTransfer& t, ShmTransfer* f);
  ShmStep recv_pushed(ShmTransfer& t);

  // Our landings closed: a peer that still reduces must not write into them any more.
  void close_landings();

 private:
  // A forward about to be reduced takes the peer's landing for it, if offered (push_to).
  void take_landing(ShmTransfer& f);
  // The peer's allocation a header names, mapped here (cached).
  const char* peer_bytes(const ZeroCopyHeader& h, size_t len);

  int peer_, peer_pid_;
  ShmProducer& out_;
  ShmConsumer& in_;
  uint64_t zerocopy_min_;  // what we published (0: we never map)
  bool push_;              // STRATA_SHM_ZEROCOPY_PUSH, and opening the peer's files works
  PeerMappings held_;      // the peer's allocations we read, mapped
  PeerMappings landings_;  // the peer's allocations we write into, mapped writable
  uint64_t mapped_sent_ = 0, mapped_recvs_ = 0;
  uint64_t pushes_sent_ = 0, pushes_seen_ = 0, pushes_taken_ = 0;
};

}  // namespace strata
