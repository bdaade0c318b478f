#include "ground/device/emulated/context_lock.hpp"

#include <cstdio>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"

namespace strata::device::emulated {

void ContextLock::need(const char* call) {
  acquire(call, nullptr);
  release();
}

void ContextLock::acquire(const char* call, const char* waits_for) {
  refuse_while_streams_held(call);
  if (!enabled_) return;
  std::unique_lock lk(m_);
  if (held_ && holder_ == std::this_thread::get_id())
    throw InternalError(std::string("emulated CUDA context lock: ") + call + " on the thread that holds it (" +
                        holder_what_ + ")");
  if (!cv_.wait_for(lk, patience_, [&] { return !held_; })) {
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.1f", patience_.count() / 1000.0);
    throw SystemError(std::string("emulated CUDA context lock: ") + call + " waited " + waited +
                      " s for the device's context lock, which another thread holds in " + holder_what_ +
                      ": on a GPU this call would wait for ever (a hang)");
  }
  if (!waits_for) return;  // a moment's use: nobody else waits meanwhile
  held_ = true;
  holder_ = std::this_thread::get_id();
  holder_what_ = std::string(call) + ", waiting for " + waits_for;
}

void ContextLock::release() {
  if (!enabled_) return;
  {
    std::lock_guard lk(m_);
    if (!held_ || holder_ != std::this_thread::get_id()) return;  // need(): nothing was taken
    held_ = false;
    holder_what_.clear();
  }
  cv_.notify_all();
}

}  // namespace strata::device::emulated
