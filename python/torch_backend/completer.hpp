// Completes one communicator's works in the order they were issued, which is the order
// the library runs them in, on a thread of its own: a work's future then completes (and
// runs its callbacks) without anyone waiting on the work.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "work.hpp"

namespace strata_torch {

class Completer {
 public:
  Completer() = default;
  ~Completer() { stop(); }
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void push(c10::intrusive_ptr<StrataWork> work);
  // Completes everything pushed so far, then ends the thread.
  void stop();

 private:
  void loop();
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<StrataWork>> queue_;
  bool stop_ = false;
  std::thread thread_;  // started by the first push
};

}  // namespace strata_torch
