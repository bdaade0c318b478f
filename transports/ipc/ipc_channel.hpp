// The shared memory of one pair of ranks on the ipc link (docs/transports.md, "ipc"): a
// ring of transfer descriptors each way, written by the sender, and the count of
// transfers the receiver has finished (its acknowledgements). A memfd that the lower rank
// creates and passes to the higher one over their socket at setup; both map it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace strata {

// One transfer, as the sender publishes it.
struct IpcDescriptor {
  uint64_t id;           // the sender's allocation id (ground/device/memory.hpp); 0: an empty transfer
  uint64_t offset;       // where the bytes start in that allocation
  uint64_t bytes;
  uint64_t length;       // the allocation's length: what its handle maps
  uint64_t handle_sent;  // 1: its handle went over the socket just before this was published
  uint64_t pad[3];
};
static_assert(sizeof(IpcDescriptor) == 64);

// Transfers from one rank of the pair to the other.
struct IpcDirection {
  static constexpr uint64_t kRing = 64;  // descriptors the sender may publish ahead of the acks
  alignas(64) std::atomic<uint64_t> published;  // descriptors ever published (sender)
  alignas(64) std::atomic<uint64_t> acked;      // transfers ever finished (receiver)
  alignas(64) IpcDescriptor ring[kRing];        // transfer n in ring[n % kRing]
};

struct IpcChannel {
  static constexpr uint64_t kMagic = 0x3143504941525453;  // "STRAIPC1"
  uint64_t magic;
  alignas(64) IpcDirection way[2];  // [0]: from the lower rank to the higher; [1]: back
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the channel is shared between processes");

// A mapping of a pair's channel.
class IpcChannelMap {
 public:
  // A new, zeroed channel (the lower rank's).
  static std::shared_ptr<IpcChannelMap> create();
  // The channel in the memfd the peer passed (taken over); SystemError when it is not one.
  static std::shared_ptr<IpcChannelMap> open(int fd, int peer);
  ~IpcChannelMap();
  IpcChannelMap(const IpcChannelMap&) = delete;
  IpcChannelMap& operator=(const IpcChannelMap&) = delete;

  IpcChannel* get() const { return channel_; }
  int fd() const { return fd_; }

 private:
  IpcChannelMap() = default;
  IpcChannel* channel_ = nullptr;
  int fd_ = -1;
};

}  // namespace strata
