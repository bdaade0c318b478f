// CUDA's per-device context lock, as the emulated backend models it (docs/device.md,
// "Blocking rules"). On a GPU some driver calls block the calling thread until a stream
// or the whole device gets somewhere (a copy to or from pageable memory, cudaFree, a
// pinned or device allocation, loading a module) and keep the context's lock meanwhile;
// other driver calls need that lock (creating streams and events, pinned allocation, the
// legacy IPC calls, pointer queries on memory the backend did not allocate). A call that
// needs it while another thread's blocking call holds it waits; if the blocking call
// waits for a stream that this thread holds, that is a hang (seen on an H200:
// docs/gpu.md).
//
// Here: a blocking call holds the lock while it waits (hold); a call that needs it waits
// for the holder (need), and names the holder and what it waits for when it has waited
// `patience` (on a GPU it would wait for ever). On the worker of a device call (inside a
// device::StreamsHeld) a call that needs the lock is refused at once, whether or not it
// is held now: on a GPU it hangs whenever the user's thread happens to block on the held
// stream, so CI must fail every time, not by timing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace strata::device::emulated {

class ContextLock {
 public:
  // `enabled` false: nothing is held or waited for (STRATA_EMULATED_CUDA_RULES=0); the
  // refusal on a worker stays.
  ContextLock(bool enabled, std::chrono::milliseconds patience) : enabled_(enabled), patience_(patience) {}

  // `call` needs the lock for a moment.
  void need(const char* call);

  // `call` holds the lock while wait() runs (what it waits for: `waits_for`, for the
  // message another thread gets when it gives up). It first needs the lock like any call.
  template <typename Wait>
  void hold_while(const char* call, const char* waits_for, Wait&& wait) {
    acquire(call, waits_for);
    struct Release {
      ContextLock* lock;
      ~Release() { lock->release(); }
    } release{this};
    wait();
  }

  bool enabled() const { return enabled_; }
  // Whether a blocking call holds it now (tests wait for that before probing).
  bool held() {
    std::lock_guard lk(m_);
    return held_;
  }

 private:
  void acquire(const char* call, const char* waits_for);
  void release();

  const bool enabled_;
  const std::chrono::milliseconds patience_;
  std::mutex m_;
  std::condition_variable cv_;
  bool held_ = false;
  std::thread::id holder_;
  std::string holder_what_;  // "a copy to pageable memory, waiting for its stream"
};

}  // namespace strata::device::emulated
