// The order of a communicator's operations: they run one at a time, in the order they
// were issued. An asynchronous call is queued for a worker thread; a blocking call with
// nothing queued before it runs on its caller's thread without taking a mutex or making a
// system call (the `busy`/`waiters` protocol below). Knows nothing of what an operation does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "strata/strata.hpp"

namespace strata {

// One queued operation: what Request waits on.
struct Request::Op {
  std::function<void()> run;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void complete(std::exception_ptr e);
};

class OpQueue {
 public:
  OpQueue() = default;
  ~OpQueue() { stop(); }
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues `fn` behind everything issued before it; the Request reports its end.
  Request submit(std::function<void()> fn);

  // Runs `fn` now on this thread when nothing is queued or running, else queues it and
  // waits; rethrows its error. A template, not std::function: a blocking call's closure
  // is not allocated per call. An operation this thread queued earlier is counted in
  // `queued_` before submit returns, so it always runs first; against other threads'
  // calls no order is promised.
  template <class Fn>
  void run_now(const Fn& fn) {
    bool idle = false;
    if (queued_.load() != 0 || !busy_.compare_exchange_strong(idle, true)) {
      submit(fn).wait();
      return;
    }
    std::exception_ptr e = run_caught(fn);
    release();
    if (e) std::rethrow_exception(e);
  }

  // Runs `fn` on this thread once everything issued before it has run, with nothing else
  // running meanwhile (what a device call makes on its caller's thread); rethrows its error.
  template <class Fn>
  void run_here(const Fn& fn) {
    take_when_idle();
    std::exception_ptr e = run_caught(fn);
    release();
    if (e) std::rethrow_exception(e);
  }

  // Returns once nothing is queued or running.
  void drain();
  // Drains, then ends the worker thread. Later submits are not run.
  void stop();
  // Fails every queued operation with `error`, waits for the running one (the caller has
  // made it fail promptly), ends the worker.
  void abort(std::exception_ptr error);

 private:
  template <class Fn>
  static std::exception_ptr run_caught(const Fn& fn) {
    try {
      fn();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }
  void worker_loop();
  void release();  // clears busy_, waking whoever waits for it
  void take_when_idle();  // sets busy_ once nothing is queued or running
  template <class Pred>
  void wait_not_busy(std::unique_lock<std::mutex>& lk, const Pred& also);

  // `busy_` is taken by whoever runs an operation (the worker, or a blocking call on its
  // caller's thread). The queue is guarded by m_; `queued_` mirrors its size and
  // `waiters_` counts threads waiting on cv_ for `busy_` to drop, so a blocking call with
  // nothing queued takes neither the mutex nor a syscall.
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request::Op>> queue_;
  std::atomic<size_t> queued_{0};
  std::atomic<bool> busy_{false};
  std::atomic<int> waiters_{0};
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace strata
