// A device link's own stream (transports/ipc, transports/staging) and the points on it
// the link waits for. Made on first use, so a communicator whose device links never carry
// a byte never makes a device backend (nor a CUDA context). Points complete in the order
// they were marked; done() asks the oldest events and never blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "ground/device/backend.hpp"

namespace strata {

class LinkStream {
 public:
  LinkStream() = default;
  ~LinkStream();  // waits for what was queued, then destroys the stream and its events
  LinkStream(const LinkStream&) = delete;
  LinkStream& operator=(const LinkStream&) = delete;

  // The process's backend (InvalidUsage when there is none), and this link's stream on it.
  device::Backend& backend();
  device::Execution& exec() { return backend().execution(); }
  device::Stream stream();
  // Makes the stream and `events` spare events now, not on first use (Link::prepare).
  void prepare(size_t events);

  // Waits for what was queued (nothing when the stream was never made).
  void synchronize();

  // A point after the tasks queued on stream() so far; its ticket (1, 2, ...).
  uint64_t mark();
  // Whether the stream has passed `ticket`.
  bool done(uint64_t ticket);
  // Some marked point has not been seen done yet.
  bool busy() const { return !pending_.empty(); }

 private:
  struct Point {
    uint64_t ticket;
    device::Event event;
  };
  device::Backend* backend_ = nullptr;
  device::Stream stream_ = nullptr;
  bool made_ = false;
  std::deque<Point> pending_;
  std::vector<device::Event> spare_;  // events whose point has passed, for reuse
  uint64_t marked_ = 0, passed_ = 0;
};

}  // namespace strata
