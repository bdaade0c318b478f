#include "device/on_device.hpp"

#include <algorithm>
#include <cstring>

namespace strata::train {

namespace {
constexpr int kSlots = 4;
constexpr size_t kSlotBytes = 4u << 20;  // uploads go in pieces of this size
}  // namespace

OnDevice::OnDevice(strata::device::Backend& backend, const char* name)
    : backend_(backend), name_(name), stream_(backend.execution().stream_create()) {
  auto& ex = backend_.execution();
  for (int i = 0; i < kSlots; ++i) slots_.push_back({backend_.memory().host_alloc(kSlotBytes), ex.event_create()});
}

OnDevice::~OnDevice() {
  auto& ex = backend_.execution();
  ex.stream_destroy(stream_);  // waits for what is queued
  for (Slot& s : slots_) {
    ex.event_destroy(s.copied);
    backend_.memory().host_free(s.pinned);
  }
}

void* OnDevice::alloc(size_t bytes) const {
  void* p = backend_.memory().alloc(bytes);
  if (p) backend_.execution().memset(p, 0, bytes, stream_);
  return p;
}

void OnDevice::free(void* p) const { backend_.memory().free(p); }

void OnDevice::upload(void* dst, const void* host_src, size_t bytes) const {
  auto& ex = backend_.execution();
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kSlotBytes, bytes - done);
    Slot& s = slots_[next_slot_++ % slots_.size()];
    ex.event_synchronize(s.copied);  // its last copy has left it
    std::memcpy(s.pinned, static_cast<const char*>(host_src) + done, n);
    ex.copy(static_cast<char*>(dst) + done, s.pinned, n, stream_);
    ex.event_record(s.copied, stream_);
    done += n;
  }
}

void OnDevice::download(void* host_dst, const void* src, size_t bytes) const {
  backend_.execution().copy(host_dst, src, bytes, stream_);
  backend_.execution().stream_synchronize(stream_);
}

void OnDevice::copy(void* dst, const void* src, size_t bytes) const {
  backend_.execution().copy(dst, src, bytes, stream_);
}

void OnDevice::zero(void* dst, size_t bytes) const { backend_.execution().memset(dst, 0, bytes, stream_); }

void OnDevice::synchronize() const { backend_.execution().stream_synchronize(stream_); }

}  // namespace strata::train
