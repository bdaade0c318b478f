#include "ground/device/emulated/memory.hpp"

#include <string>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"

namespace strata::device::emulated {

void* EmulatedMemory::alloc(size_t bytes) { return regions_.alloc(bytes, MemoryKind::device); }
void* EmulatedMemory::host_alloc(size_t bytes) {
  refuse_while_streams_held("host_alloc");
  return regions_.alloc(bytes, MemoryKind::host);
}
void EmulatedMemory::free(void* ptr) {
  if (ptr) refuse_while_streams_held("free");
  if (ptr && synchronize_device_) synchronize_device_();
  release(ptr, MemoryKind::device, Origin::allocated, "free");
}
void EmulatedMemory::host_free(void* ptr) { release(ptr, MemoryKind::host, Origin::allocated, "host_free"); }

void EmulatedMemory::release(void* ptr, MemoryKind kind, Origin origin, const char* call) {
  if (!ptr) return;
  if (!regions_.remove(ptr, kind, origin)) refuse_free(call, ptr, query(ptr), kind);
}

PointerInfo EmulatedMemory::query(const void* ptr) {
  RegionRef r = regions_.find(ptr);
  return r ? r->info() : PointerInfo{};
}

IpcHandle EmulatedMemory::export_handle(void* base) { return regions_.export_handle(base); }
void* EmulatedMemory::import_handle(const IpcHandle& handle) { return regions_.import_handle(handle); }

void EmulatedMemory::unimport(void* ptr) {
  RegionRef r = regions_.find(ptr);
  const PointerInfo info = r ? r->info() : PointerInfo{};
  if (!r || r->base != ptr || r->origin != Origin::imported || !regions_.remove(ptr, r->kind, Origin::imported))
    throw InvalidArgument("unimport: " + address_text(ptr) + " is not the address of an imported allocation" +
                          (info.origin == Origin::allocated ? " (it was allocated here: free it)" : ""));
}

EmulatedMemory::Access EmulatedMemory::access(const void* ptr, size_t bytes, const char* what) const {
  RegionRef r = regions_.find(ptr);
  if (!r) return {const_cast<char*>(static_cast<const char*>(ptr)), nullptr};  // host memory we do not know
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - r->base);
  if (bytes > r->length - offset)
    throw InvalidArgument(std::string(what) + ": " + std::to_string(bytes) + " bytes at " + address_text(ptr) +
                          " run past the end of its allocation (" + std::to_string(r->length - offset) +
                          " bytes left of " + std::to_string(r->length) + " at " + address_text(r->base) + ")");
  return {r->shadow + offset, r};
}

}  // namespace strata::device::emulated
