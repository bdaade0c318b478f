// The shm row's setup: this rank creates one segment with a FIFO per peer it serves (ring
// i receives from its i-th peer in rank order) and tells each peer which ring is its. Its
// connection info reaches a peer only after the segment exists, so the peer can map it at
// once; the name is unlinked once every peer has mapped it (all_connected), so nothing is
// left in /dev/shm.
#include <cstdio>
#include <cstring>

#include "strata/error.hpp"
#include "transports/link_setup.hpp"
#include "transports/shm/shm_link.hpp"
#include "transports/shm/shm_names.hpp"

namespace strata {

namespace {

std::string segment_name(const uint8_t* secret, uint64_t tag, int rank) {
  char hex[13], rest[48];
  for (int i = 0; i < 6; ++i) std::snprintf(hex + 2 * i, 3, "%02x", secret[i]);
  std::snprintf(rest, sizeof rest, "%llx-%d", static_cast<unsigned long long>(tag), rank);
  return "/" + shm_job_prefix(hex) + rest;
}

class ShmSetup final : public LinkSetup {
 public:
  explicit ShmSetup(const SetupContext& ctx)
      : ctx_(ctx),
        own_(ShmSegment::create(segment_name(ctx.secret, ctx.comm_tag, ctx.rank), static_cast<int>(ctx.peers.size()),
                                ctx.cfg->shm_ring_bytes)) {}

  // The index of the ring in our segment that receives from `peer`.
  std::vector<char> local_info(int peer) override {
    const uint32_t ring = index_of(peer);
    std::vector<char> out(sizeof ring);
    std::memcpy(out.data(), &ring, sizeof ring);
    return out;
  }

  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) override {
    const std::string who = "rank " + std::to_string(peer);
    uint32_t me_there = 0;
    if (remote.size() != sizeof me_there) throw SystemError("unexpected connection info from " + who);
    std::memcpy(&me_there, remote.data(), sizeof me_there);
    auto theirs = ShmSegment::open(segment_name(ctx_.secret, ctx_.comm_tag, peer));
    if (me_there >= static_cast<uint32_t>(theirs->nrings()))
      throw InternalError("shared memory layout mismatch with " + who);
    ShmRing* out = theirs->ring(static_cast<int>(me_there));
    ShmRing* in = own_->ring(static_cast<int>(index_of(peer)));
    return std::make_unique<ShmLink>(peer, out, in, std::move(theirs), own_);
  }

  void all_connected() override { own_->unlink(); }

  std::string describe(int) const override { return "same host"; }

 private:
  uint32_t index_of(int peer) const {
    for (size_t i = 0; i < ctx_.peers.size(); ++i)
      if (ctx_.peers[i] == peer) return static_cast<uint32_t>(i);
    throw InternalError("shared memory setup asked about rank " + std::to_string(peer) + ", which it does not serve");
  }

  SetupContext ctx_;
  std::shared_ptr<ShmSegment> own_;
};

}  // namespace

const LinkSetupTransport kShmTransport = kAlwaysThere<ShmSetup>;

}  // namespace strata
