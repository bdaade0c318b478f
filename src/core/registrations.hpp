// The buffers a communicator registered (Comm::register_buffer): each handle holds one
// registration of the process's shareable-memory index (ground/device/shared_host.hpp);
// what is still registered when the communicator goes is released then.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "ground/device/shared_host.hpp"

namespace strata {

class Registrations {
 public:
  Registrations() = default;
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;
  ~Registrations();
  // A handle for [buf, buf + bytes), made shareable; InvalidArgument when it cannot be.
  void* add(void* buf, size_t bytes);
  // InvalidArgument for a handle that is not one of this communicator's live ones.
  void remove(void* handle);

 private:
  struct Entry {
    device::RegionRef region;
  };
  std::mutex m_;
  std::map<void*, std::unique_ptr<Entry>> live_;
};

}  // namespace strata
