#include "core/op_queue.hpp"

namespace strata {

void Request::Op::complete(std::exception_ptr e) {
  std::lock_guard lk(m);
  error = e;
  done = true;
  cv.notify_all();
}

void Request::wait() {
  if (!op_) return;  // an empty request (e.g. send_async inside a group) is already done
  std::unique_lock lk(op_->m);
  op_->cv.wait(lk, [&] { return op_->done; });
  if (op_->error) std::rethrow_exception(op_->error);
}

bool Request::test() {
  if (!op_) return true;
  std::lock_guard lk(op_->m);
  if (!op_->done) return false;
  if (op_->error) std::rethrow_exception(op_->error);
  return true;
}

Request OpQueue::submit(std::function<void()> fn) {
  auto op = std::make_shared<Request::Op>();
  op->run = std::move(fn);
  std::lock_guard lk(m_);
  if (stop_) {
    op->complete(std::make_exception_ptr(InvalidUsage("the communicator was stopped before this operation ran")));
    return Request(op);
  }
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  queue_.push_back(op);
  queued_.store(queue_.size());
  cv_.notify_all();
  return Request(op);
}

void OpQueue::release() {
  busy_.store(false);
  if (waiters_.load() != 0) {
    std::lock_guard lk(m_);
    cv_.notify_all();
  }
}

// Waits under m_ until `busy_` is clear and `also()` holds. Counted in `waiters_` while
// it waits, so whoever clears `busy_` without the mutex knows to wake it. (Sequentially
// consistent: either the clearer sees the count, or the waiter sees `busy_` clear.)
template <class Pred>
void OpQueue::wait_not_busy(std::unique_lock<std::mutex>& lk, const Pred& also) {
  waiters_.fetch_add(1);
  cv_.wait(lk, [&] { return !busy_.load() && also(); });
  waiters_.fetch_sub(1);
}

void OpQueue::worker_loop() {
  std::unique_lock lk(m_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    wait_not_busy(lk, [] { return true; });
    if (queue_.empty()) continue;  // an abort dropped it while we waited
    bool idle = false;
    if (!busy_.compare_exchange_strong(idle, true)) continue;  // a blocking call got in first
    auto op = queue_.front();
    queue_.pop_front();
    queued_.store(queue_.size());
    lk.unlock();
    op->complete(run_caught(op->run));
    lk.lock();
    busy_.store(false);
    cv_.notify_all();
  }
}

void OpQueue::take_when_idle() {
  std::unique_lock lk(m_);
  for (;;) {
    wait_not_busy(lk, [&] { return queue_.empty(); });
    bool idle = false;
    if (busy_.compare_exchange_strong(idle, true)) return;  // else a blocking call got in first
  }
}

void OpQueue::drain() {
  std::unique_lock lk(m_);
  wait_not_busy(lk, [&] { return queue_.empty(); });
}

void OpQueue::stop() {
  drain();
  {
    std::lock_guard lk(m_);
    stop_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void OpQueue::abort(std::exception_ptr error) {
  std::deque<std::shared_ptr<Request::Op>> dropped;
  {
    std::lock_guard lk(m_);
    dropped.swap(queue_);
    queued_.store(0);
    stop_ = true;
    cv_.notify_all();
  }
  for (auto& op : dropped) op->complete(error);
  drain();
  if (worker_.joinable()) worker_.join();
}

}  // namespace strata
