#include "core/stream_order.hpp"

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/engine.hpp"
#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

// An 8-byte flag in pinned host memory, zero, handed out once and never freed (see the
// header): pages of them are shared by every communicator of the process.
uint64_t* new_flag(device::Backend& b) {
  static std::mutex m;
  static uint64_t* page = nullptr;
  static size_t used = 0;
  constexpr size_t kPageBytes = 4096, kPerPage = kPageBytes / sizeof(uint64_t);
  std::lock_guard lk(m);
  if (!page || used == kPerPage) {
    page = static_cast<uint64_t*>(b.memory().host_alloc(kPageBytes));
    used = 0;
  }
  uint64_t* f = page + used++;
  __atomic_store_n(f, 0, __ATOMIC_RELEASE);
  return f;
}

uint64_t load(const uint64_t* f) { return __atomic_load_n(f, __ATOMIC_ACQUIRE); }

// done only grows: a late store of an older call's number must not lower it.
void raise_to(uint64_t* f, uint64_t v) {
  uint64_t cur = load(f);
  while (cur < v && !__atomic_compare_exchange_n(f, &cur, v, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

}  // namespace

StreamOrder::StreamOrder(device::Backend& backend, int rank)
    : backend_(backend), rank_(rank), done_(new_flag(backend)) {}

StreamOrder::~StreamOrder() { release_all(); }

const uint64_t* StreamOrder::start_flag(device::Stream s) {
  uint64_t*& f = start_[s];
  if (!f) f = new_flag(backend_);
  return f;
}

StreamOrder::Ticket StreamOrder::issue(const std::vector<device::Stream>& streams) {
  std::lock_guard lk(m_);
  Ticket t;
  t.seq = ++issued_;
  device::Execution& x = backend_.execution();
  try {
    for (device::Stream s : streams) {
      auto* f = const_cast<uint64_t*>(start_flag(s));
      x.write_value(s, f, t.seq);
      x.wait_value(s, done_, t.seq);
      t.started.push_back(f);
    }
  } catch (...) {
    t.error = std::current_exception();
  }
  return t;
}

void StreamOrder::wait_started(const Ticket& t, double timeout_s,
                               const std::function<std::exception_ptr()>& cancelled) const {
  auto reached = [&] {
    for (const uint64_t* f : t.started)
      if (load(f) < t.seq) return false;
    return true;
  };
  // Spin first: a stream with nothing before the call is there within microseconds, and
  // this wait is on every small call's path. Then yield, then nap: a stream busy with
  // long work must not cost a core.
  for (int i = 0; i < 256; ++i)
    if (reached()) return;
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s);
  for (unsigned polls = 0;; ++polls) {
    if (reached()) return;
    const auto waited = Clock::now() - begin;
    if (std::exception_ptr e = cancelled()) std::rethrow_exception(e);
    if (waited > limit)
      throw TimeoutError(rank_, "rank " + std::to_string(rank_) +
                                    ": the stream of a device call did not reach it within " +
                                    std::to_string(timeout_s) +
                                    " s (the work queued on the stream before the call has not finished); the call "
                                    "did not run");
    if (waited < std::chrono::microseconds(200)) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(polls < 1000 ? 20 : 200));
  }
}

void StreamOrder::complete(uint64_t seq) { raise_to(done_, seq); }

void StreamOrder::release_all() {
  std::lock_guard lk(m_);
  raise_to(done_, issued_);
}

Request DeviceCalls::submit(OpQueue& queue, Engine* engine, const std::vector<void*>& streams,
                            const std::vector<int>& peers, const std::vector<CallStaging::Buffer>& buffers, Fn fn,
                            bool wait, KeepError keep_error) {
  Request r;
  {
    std::lock_guard lk(issue_m_);
    device::Backend& backend = device::require_backend("a call on device memory");
    for (void* s : streams)
      if (backend.execution().stream_capturing(s))
        throw InvalidUsage("a device call on a stream that is being captured into a CUDA graph "
                           "(cudaStreamBeginCapture): Strata cannot be captured yet (a call's stream waits for a flag "
                           "its worker raises from the host, which a graph replay would not wait for); make the call "
                           "outside the capture");
    if (!order_) order_ = std::make_unique<StreamOrder>(backend, rank_);
    if (engine) {
      engine->prepare(MemoryKind::device);
      if (!engine->connected(peers, MemoryKind::device))
        queue.run_here([&] {
          engine->connector().allow_device(true);
          struct Disallow {
            Connector& c;
            ~Disallow() { c.allow_device(false); }
          } disallow{engine->connector()};
          engine->connect(peers, MemoryKind::device);
        });
    }
    if (!staging_) staging_ = std::make_unique<CallStaging>(backend);
    CallStaging::Plan plan = staging_->prepare(buffers);
    StreamOrder::Ticket t = order_->issue(streams);
    const std::exception_ptr refused = t.error;
    r = queue.submit([this, engine, t = std::move(t), plan = std::move(plan), fn = std::move(fn),
                      keep_error = std::move(keep_error)] {
      run(
          *engine, t,
          [&] {
            staging_->copy_in(plan);
            fn(plan.moved);
            staging_->copy_out(plan);
          },
          keep_error);
    });
    if (refused) std::rethrow_exception(refused);  // the worker only completes its number
  }
  if (wait) r.wait();
  return r;
}

void DeviceCalls::run(Engine& engine, const StreamOrder::Ticket& t, const std::function<void()>& fn,
                      const KeepError& keep_error) {
  log::set_thread_rank(rank_);
  if (t.error) {
    order_->complete(t.seq);
    return;
  }
  try {
    try {
      // Waiting for the stream, the worker still answers peers' probes, saying so.
      ControlChannel& control = engine.control();
      control.doing_stream_wait(t.seq);
      order_->wait_started(t, timeout_s_, [&control]() -> std::exception_ptr {
        if (std::exception_ptr e = control.interrupted()) return e;
        try {
          control.serve_while_waiting();
        } catch (...) {
          return std::current_exception();
        }
        return nullptr;
      });
    } catch (const Error&) {
      engine.control().fail_call(std::current_exception());  // the peers are told; throws
    }
    device::StreamsHeld held;  // the worker creates nothing the driver could block on
    fn();
  } catch (...) {
    keep_error(std::current_exception());
    order_->complete(t.seq);
    throw;
  }
  order_->complete(t.seq);
}

}  // namespace strata
