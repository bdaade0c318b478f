// The emulated backend's streams and events. A stream is a thread running its queue of
// tasks in order, truly asynchronously to whoever queued them; with a delay it sleeps a
// random 0..delay µs before each task, so a missing wait between streams shows up as a
// wrong result instead of passing by luck (STRATA_EMULATED_DELAY_US).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace strata::device::emulated {

class Stream {
 public:
  explicit Stream(unsigned delay_us);
  ~Stream();  // runs what is queued, then stops the thread
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues a task; returns its ticket (1, 2, ...: tasks queued so far, this one included).
  uint64_t enqueue(std::function<void()> task);
  // Tickets handed out so far: wait_reached(queued()) waits for everything queued until now.
  uint64_t queued();
  // Waits until the task of `ticket` and every task before it has run.
  void wait_reached(uint64_t ticket);
  // Waits until every task queued before the call has run.
  void synchronize() { wait_reached(queued()); }

 private:
  void run();

  std::mutex m_;
  std::condition_variable work_, done_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0, finished_ = 0;  // tasks ever queued / run
  bool stop_ = false;
  const unsigned delay_us_;
  std::mt19937 rng_;
  std::thread thread_;  // last: starts once the rest is ready
};

// A point in a stream: record() marks the stream's work so far (generation g), and the
// stream reaching that point completes g.
class Event {
 public:
  // The generation record() marks; the stream completes it with complete().
  uint64_t mark();
  void complete(uint64_t generation);
  // The generation of the last mark() (0: never recorded).
  uint64_t last() const;
  // Whether the last mark() has completed (an event never recorded has).
  bool done() const;
  void wait(uint64_t generation) const;

 private:
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  uint64_t marked_ = 0, completed_ = 0;
};

}  // namespace strata::device::emulated
