#include "ground/device/emulated/stream.hpp"

#include <algorithm>
#include <chrono>

namespace strata::device::emulated {

Stream::Stream(unsigned delay_us) : delay_us_(delay_us), rng_(std::random_device{}()), thread_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard lk(m_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

uint64_t Stream::enqueue(std::function<void()> task) {
  uint64_t ticket;
  {
    std::lock_guard lk(m_);
    queue_.push_back(std::move(task));
    ticket = ++queued_;
  }
  work_.notify_one();
  return ticket;
}

uint64_t Stream::queued() {
  std::lock_guard lk(m_);
  return queued_;
}

void Stream::wait_reached(uint64_t ticket) {
  std::unique_lock lk(m_);
  done_.wait(lk, [&] { return finished_ >= ticket; });
}

void Stream::run() {
  std::unique_lock lk(m_);
  for (;;) {
    work_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    if (delay_us_) {
      std::uniform_int_distribution<unsigned> pause(0, delay_us_);
      std::this_thread::sleep_for(std::chrono::microseconds(pause(rng_)));
    }
    task();
    task = nullptr;  // what it held (memory regions, events) goes before the task counts as done
    lk.lock();
    ++finished_;
    done_.notify_all();
  }
}

uint64_t Event::mark() {
  std::lock_guard lk(m_);
  return ++marked_;
}

void Event::complete(uint64_t generation) {
  {
    std::lock_guard lk(m_);
    completed_ = std::max(completed_, generation);
  }
  cv_.notify_all();
}

uint64_t Event::last() const {
  std::lock_guard lk(m_);
  return marked_;
}

bool Event::done() const {
  std::lock_guard lk(m_);
  return completed_ >= marked_;
}

void Event::wait(uint64_t generation) const {
  std::unique_lock lk(m_);
  cv_.wait(lk, [&] { return completed_ >= generation; });
}

}  // namespace strata::device::emulated
