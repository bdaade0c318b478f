// The staging link: device memory between hosts, through the pair's host link (tcp, ucx
// or ibverbs; docs/transports.md, "staging"). A transfer travels in chunks of the same
// size on both ends, each one transfer of the host link. Sending: chunk k is copied from
// device memory into a pinned host slot on this link's stream and, once there, sent on
// the host link, while the next chunks are copied into the other slots. Receiving: chunk k
// lands in a pinned slot and is copied into device memory, or reduced there straight from
// the slot by one reduce task. A slot is reused once the host link has sent it (sending)
// or the stream has passed its task (receiving). The host link keeps serving host calls:
// one operation runs at a time on a communicator, and both ranks of a pair use the same
// memory kind per call, so its two byte streams stay in order.
#pragma once

#include <cstdint>
#include <deque>

#include "transports/link_stream.hpp"
#include "transports/transport.hpp"

namespace strata {

class StagingLink final : public Link {
 public:
  // `host` outlives this link (the mesh makes host links first and drops them last).
  // `chunk_bytes` is a multiple of 64 and the same on both ends; `slots` per direction.
  StagingLink(int peer, Link& host, size_t chunk_bytes, size_t slots);
  ~StagingLink() override;

  const char* name() const override { return "staging"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override { return sends_.transfers.empty() && recvs_.transfers.empty(); }
  Outstanding outstanding() const override { return {sends_.transfers.size(), recvs_.transfers.size()}; }
  // The host link's descriptors, while no chunk waits for the device.
  void wait_fds(std::vector<pollfd>& out) const override;
  void prepare() override;

 private:
  struct Transfer {
    char* buf;
    size_t bytes;
    Reduction reduce;
    size_t chunks;         // ceil(bytes / chunk)
    size_t begun = 0;      // chunks given a slot
    size_t finished = 0;   // chunks done with their slot
  };
  struct Chunk {
    Transfer* transfer;    // std::deque keeps its elements in place
    size_t offset, bytes;
    char* slot;
    uint64_t ticket = 0;      // the stream's point after its copy or reduction (0: none yet)
    uint64_t host_index = 0;  // its transfer on the host link, once posted
    bool on_host = false;
  };
  // Both directions: chunks in flight, oldest first, and the slots they use in turn.
  struct Pipe {
    std::deque<Transfer> transfers;
    std::deque<Chunk> chunks;
    char* slots = nullptr;  // pinned host memory, `slots` chunks (allocated on first use)
    size_t next_slot = 0;
    uint64_t host_posted = 0;  // this direction's transfers posted on the host link
    LinkStream stream;
  };

  bool advance_sends(uint64_t host_done);
  bool advance_recvs(uint64_t host_done);
  // The next chunk of the first transfer that has one without a slot, given a free slot.
  Chunk* begin_chunk(Pipe& p);
  // Done transfers leave the front (also those of no chunk at all).
  static bool pop_finished(Pipe& p);
  // How many of the host link's transfers of this direction are done.
  static uint64_t done_of(uint64_t posted, size_t outstanding);

  Link& host_;
  size_t chunk_, nslots_;
  Pipe sends_, recvs_;
};

// STRATA_STAGING_CHUNK_BYTES, refused unless a multiple of 64 (a rule the settings table
// cannot state): read by the staging setup, and by communicator creation, which checks
// every setting whether or not a staging link is made.
size_t staging_chunk_bytes();

}  // namespace strata
