#include "completer.hpp"

namespace strata_torch {

void Completer::push(c10::intrusive_ptr<StrataWork> work) {
  std::lock_guard lk(m_);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  queue_.push_back(std::move(work));
  cv_.notify_one();
}

void Completer::stop() {
  {
    std::lock_guard lk(m_);
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void Completer::loop() {
  std::unique_lock lk(m_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything pushed is complete
    c10::intrusive_ptr<StrataWork> work = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    try {
      work->complete();  // the operation's error is kept in the work and its future
    } catch (...) {
      // a future callback that threw: nothing on this thread can report it
    }
    work.reset();      // outside the lock: the last reference may free tensors
    lk.lock();
  }
}

}  // namespace strata_torch
