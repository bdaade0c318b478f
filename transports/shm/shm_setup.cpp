// The shm row's setup: this rank creates one segment with a FIFO for each rank of its host
// (ring i receives from its i-th same-host peer in rank order), made when the first pair
// needs it; a ring's pages are touched only when its pair connects. Each FIFO holds
// STRATA_SHM_RANK_BYTES / (ranks on the host - 1), at most STRATA_SHM_RING_BYTES, so what a
// rank receives into is bounded whatever the ranks on its host. A peer is told which ring
// is its, and where to open the segment: through this process's descriptor first, else by
// name; once a peer has opened it the first way, the name is unlinked, so nothing is left
// in /dev/shm (where /proc/<pid>/fd cannot be opened, the name stays until destroy).
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <atomic>
#include <cstring>
#include <map>

#include "strata/error.hpp"
#include "transports/link_setup.hpp"
#include "transports/shm/shm_link.hpp"
#include "transports/shm/shm_names.hpp"

namespace strata {

namespace {

std::string segment_name(const uint8_t* secret, uint64_t tag, int rank) {
  static std::atomic<unsigned> made{0};
  char hex[13], rest[80];
  for (int i = 0; i < 6; ++i) std::snprintf(hex + 2 * i, 3, "%02x", secret[i]);
  std::snprintf(rest, sizeof rest, "%llx-%d-%d-%u", static_cast<unsigned long long>(tag), rank,
                static_cast<int>(getpid()), made.fetch_add(1));
  return "/" + shm_job_prefix(hex) + rest;
}

// What a peer is told: its ring in our segment, and where to open the segment (our
// descriptor, else its name).
struct ShmInfo {
  uint32_t ring;
  int32_t pid, fd;
  char name[100];
};

class ShmSetup final : public LinkSetup {
 public:
  explicit ShmSetup(const SetupContext& ctx)
      : ctx_(ctx),
        prefix_(segment_name(ctx.secret, 0, 0).substr(0, 1 + shm_job_prefix("000000000000").size())),
        own_(ShmSegment::create(
            segment_name(ctx.secret, ctx.comm_tag, ctx.rank), static_cast<int>(ctx.peers.size()),
            shm_fifo_bytes(ctx.cfg->shm_rank_bytes, ctx.cfg->shm_ring_bytes, static_cast<int>(ctx.peers.size())))) {}

  std::vector<char> local_info(int peer) override {
    ShmInfo info{index_of(peer), static_cast<int32_t>(getpid()), static_cast<int32_t>(own_->owner_fd()), {}};
    std::snprintf(info.name, sizeof info.name, "%s", own_->name().c_str());
    std::vector<char> out(sizeof info);
    std::memcpy(out.data(), &info, sizeof info);
    return out;
  }

  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) override {
    const std::string who = "rank " + std::to_string(peer);
    ShmInfo info{};
    if (remote.size() != sizeof info) throw SystemError("unexpected connection info from " + who);
    std::memcpy(&info, remote.data(), sizeof info);
    if (std::memchr(info.name, 0, sizeof info.name) == nullptr ||
        std::strncmp(info.name, prefix_.c_str(), prefix_.size()) != 0)
      throw SystemError("unexpected connection info from " + who + " (a shared memory segment not of this job)");
    bool by_proc = false;
    auto theirs = ShmSegment::open(info.name, info.pid, info.fd, &by_proc);
    if (info.ring >= static_cast<uint32_t>(theirs->nrings()))
      throw InternalError("shared memory layout mismatch with " + who);
    by_proc_[peer] = by_proc;
    const int mine = static_cast<int>(index_of(peer));
    own_->populate(mine);
    ShmRing* out = theirs->ring(static_cast<int>(info.ring));
    ShmRing* in = own_->ring(mine);
    return std::make_unique<ShmLink>(peer, out, in, std::move(theirs), own_);
  }

  uint8_t connected_note(int peer) override { return by_proc_[peer] ? 1 : 0; }
  // A peer opened the segment through our descriptor: the others can too, and the name goes.
  void peer_connected(int, uint8_t note) override {
    if (note == 1) own_->unlink();
  }

  std::string describe(int) const override {
    return "same host, FIFO " + std::to_string(own_->ring(0)->capacity) + " B";
  }

 private:
  uint32_t index_of(int peer) const {
    auto it = std::lower_bound(ctx_.peers.begin(), ctx_.peers.end(), peer);
    if (it == ctx_.peers.end() || *it != peer)
      throw InternalError("shared memory setup asked about rank " + std::to_string(peer) + ", which it does not serve");
    return static_cast<uint32_t>(it - ctx_.peers.begin());
  }

  SetupContext ctx_;
  std::string prefix_;  // of every segment name of this job
  std::shared_ptr<ShmSegment> own_;
  std::map<int, bool> by_proc_;  // by peer: we opened its segment through its descriptor
};

}  // namespace

const LinkSetupTransport kShmTransport = kAlwaysThere<ShmSetup>;

}  // namespace strata
