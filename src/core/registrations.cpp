#include "core/registrations.hpp"

#include "strata/error.hpp"

namespace strata {

Registrations::~Registrations() {
  for (auto& [h, e] : live_) device::release_registration(e->region);
}

void* Registrations::add(void* buf, size_t bytes) {
  auto e = std::make_unique<Entry>(Entry{device::register_shareable(buf, bytes)});
  void* h = e.get();
  std::lock_guard lk(m_);
  live_[h] = std::move(e);
  return h;
}

void Registrations::remove(void* handle) {
  std::unique_ptr<Entry> e;
  {
    std::lock_guard lk(m_);
    auto it = live_.find(handle);
    if (it == live_.end())
      throw InvalidArgument("deregister: " + device::address_text(handle) +
                            " is not a live registration handle of this communicator (null, deregistered already, or "
                            "another communicator's)");
    e = std::move(it->second);
    live_.erase(it);
  }
  device::release_registration(e->region);
}

}  // namespace strata
