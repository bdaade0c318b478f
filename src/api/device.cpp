// The public device API (include/strata/device.hpp): thin calls on the process's device
// backend (ground/device/backend.hpp).
#include "strata/device.hpp"

#include "ground/device/backend.hpp"
#include "ground/device/memfd_regions.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

device::Backend& need(const char* what) { return device::require_backend(what); }

// Host memory from strata::alloc where no backend is loaded: memfd-backed pages, like the
// backends' pinned memory (so they can be made shareable later).
device::MemfdRegions& plain_host_memory() {
  static auto* regions = new device::MemfdRegions;  // kept until exit, as allocations may be
  return *regions;
}

}  // namespace

void* alloc(size_t bytes, MemoryKind kind) {
  if (kind == MemoryKind::device) return need("strata::alloc of device memory").memory().alloc(bytes);
  if (kind != MemoryKind::host) throw InvalidArgument("strata::alloc: memory kind " + std::to_string(static_cast<int>(kind)) + " is not host or device");
  if (device::Backend* b = device::backend()) return b->memory().host_alloc(bytes);
  return plain_host_memory().alloc(bytes, MemoryKind::host);
}

void free(void* ptr) {
  if (!ptr) return;
  device::Backend* b = device::backend();
  if (!b) {
    if (plain_host_memory().remove(ptr, MemoryKind::host, device::Origin::allocated)) return;
    device::RegionRef r = plain_host_memory().find(ptr);
    device::refuse_free("strata::free", ptr, r ? r->info() : device::PointerInfo{}, MemoryKind::host);
  }
  const device::PointerInfo info = b->memory().query(ptr);
  if (info.kind == MemoryKind::device)
    b->memory().free(ptr);
  else
    b->memory().host_free(ptr);
}

namespace device {

const char* backend_name() {
  Backend* b = backend();
  return b ? b->name() : "none";
}

bool available() { return backend() != nullptr; }

std::string device_name() {
  Backend* b = backend();
  return b ? b->device_name() : "none";
}

MemoryKind kind_of(const void* ptr) {
  Backend* b = backend();
  return b ? b->memory().query(ptr).kind : MemoryKind::host;
}

void* alloc(size_t bytes) { return need("strata::device::alloc").memory().alloc(bytes); }
void free(void* ptr) {
  if (ptr) need("strata::device::free").memory().free(ptr);
}

Stream stream_create() { return need("strata::device::stream_create").execution().stream_create(); }
void stream_destroy(Stream s) { need("strata::device::stream_destroy").execution().stream_destroy(s); }
void stream_synchronize(Stream s) { need("strata::device::stream_synchronize").execution().stream_synchronize(s); }

void memcpy_async(void* dst, const void* src, size_t bytes, Stream s) {
  need("strata::device::memcpy_async").execution().copy(dst, src, bytes, s);
}
void memset_async(void* dst, int value, size_t bytes, Stream s) {
  need("strata::device::memset_async").execution().memset(dst, value, bytes, s);
}
void launch_host_func(Stream s, void (*fn)(void*), void* arg) {
  need("strata::device::launch_host_func").execution().host_callback(s, fn, arg);
}

}  // namespace device
}  // namespace strata
