// A transfer waiting on a shm link, and how it moves: its ShmMode is chosen when it is
// posted (a headed receive learns it from the sender's header), and the link runs one
// function per mode (shm_link.cpp, shm_zerocopy.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ground/device/memfd_regions.hpp"
#include "transports/transport.hpp"

namespace strata {

enum class ShmMode : uint8_t {
  lines,    // up to ShmInline::kMaxBytes, whole, through the inline ring
  fifo,     // through the FIFO, a piece at a time
  forward,  // a receive through the FIFO, reduced a piece at a time and forwarded from cache
  mapped,   // read in place from the sender's shareable memory (ZeroCopyHeader::mapped 1)
  pushed,   // written by the sender into the receive's landing (ZeroCopyHeader::mapped 2)
};

struct ShmTransfer {
  char* buf;
  size_t len, done = 0;
  Reduction reduce{};
  ShmMode mode = ShmMode::lines;
  bool headed = false;                 // starts with a ZeroCopyHeader (the receiver's threshold)
  bool announced = false;              // headed: the header is written (send) or read (receive)
  uint64_t number = 0;                 // its place among this link's sends or receives (landings match them)
  uint64_t seq = 0;                    // mapped send, pushed receive: done when the peer's counter reaches it
  device::RegionRef region = nullptr;  // headed send: the allocation the peer reads (none: FIFO);
                                       // receive: the allocation it offered as a landing
  const char* src = nullptr;           // mapped receive: the bytes, mapped here
  // A forwarding receive's send (its buf is the receive's destination): `ready` bytes of it
  // are reduced so far. The receive points at it with `forward`.
  bool forward_slot = false;
  size_t ready = 0;
  char* push_to = nullptr;  // a pushed forward: the peer's landing, mapped here, written as reduced
  static constexpr size_t kNoForward = ~size_t(0);
  size_t forward = kNoForward;  // the index of that send among the link's sends
};

// What one mode's step did: moved bytes, and whether the transfer is complete.
struct ShmStep {
  bool moved, done;
};

// Transfers waiting on a link, oldest first. A vector and the index of its front: it is
// emptied, not freed, when the last one is popped (every round ends with its links idle),
// so a steady stream of calls allocates nothing, and an element keeps its index while
// others are added or popped.
template <class T>
class TransferQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  size_t front_index() const { return head_; }
  size_t push_back(const T& t) {
    items_.push_back(t);
    return items_.size() - 1;
  }
  T& at(size_t index) { return items_[index]; }
  void pop_front() {
    if (++head_ == items_.size()) items_.clear(), head_ = 0;
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace strata
