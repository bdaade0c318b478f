// The ipc link: device memory between two ranks of one host (docs/transports.md, "ipc").
// A send publishes a descriptor of its bytes (allocation id, offset, length) in the pair's
// shared channel; the receiver maps the sender's allocation (its handle travels over the
// pair's AF_UNIX socket the first time, and again after the receiver evicted it), queues
// on its own stream a copy from the peer's memory into the destination, or one reduce
// task, and once the stream has passed it acknowledges through the channel; the send
// completes on that acknowledgement. No host code touches device bytes.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ground/socket.hpp"
#include "transports/ipc/ipc_channel.hpp"
#include "transports/mapping_lru.hpp"
#include "transports/peer_mappings.hpp"
#include "transports/link_stream.hpp"
#include "transports/transport.hpp"

namespace strata {

class IpcLink final : public Link {
 public:
  // `sock`: the pair's AF_UNIX socket; `lower`: this rank is the lower of the pair (it
  // sends on the channel's way 0); `cache_entries`: the peer's allocations held mapped,
  // the same on both ends.
  IpcLink(int peer, net::Fd sock, std::shared_ptr<IpcChannelMap> channel, bool lower, size_t cache_entries);
  ~IpcLink() override;

  const char* name() const override { return "ipc"; }
  // `buf` must lie in one allocation of this process's device backend (device or pinned
  // host memory; InvalidArgument otherwise).
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  void prepare() override { stream_.prepare(kPreparedEvents); }
  Outstanding outstanding() const override { return {sends_.size(), recvs_.size()}; }

  // What the receiving side's mapping cache has done so far (tests).
  struct MappingStats {
    uint64_t imports = 0, unimports = 0;
    size_t mapped = 0;  // held now, evicted ones still in use included
  };
  MappingStats mapping_stats() const;

 private:
  // Events made by prepare(): receives in flight beyond this many make theirs on the worker.
  static constexpr size_t kPreparedEvents = 16;
  struct Send {
    IpcDescriptor desc;
    void* base;  // the allocation's start, whose handle may travel
    uint64_t seq;
  };
  struct Recv {
    char* buf;
    size_t bytes;
    Reduction reduce;
    uint64_t seq;
    uint64_t ticket = 0;  // the stream's point after its task (0: not started)
  };

  bool publish();
  bool complete_sends();
  bool start_recvs();
  bool finish_recvs();
  // The peer's memory a descriptor names, mapped (the receive `seq` uses it).
  const char* source(const IpcDescriptor& d, uint64_t seq);
  void unimport(const PeerMappings::Mapping& m);
  // The peer's end of the socket is closed: its process ended (asked now and then while
  // this link waits for the peer and nothing moves).
  bool peer_closed() const;
  [[noreturn]] void fail(const std::string& what) const;

  net::Fd sock_;
  std::shared_ptr<IpcChannelMap> channel_;
  IpcDirection* out_;
  IpcDirection* in_;
  std::deque<Send> sends_;  // posted, oldest first; published up to published_
  std::deque<Recv> recvs_;
  uint64_t sends_posted_ = 0, published_ = 0, recvs_posted_ = 0, recvs_started_ = 0, recvs_finished_ = 0;
  MappingLru peer_holds_;  // the peer's cache of our allocations, as it must be
  PeerMappings we_hold_;   // our cache of the peer's allocations
  LinkStream stream_;
  MappingStats stats_;
  unsigned quiet_polls_ = 0;
};

}  // namespace strata
