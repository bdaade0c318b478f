#include "ground/device/emulated/memory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"

namespace strata::device::emulated {

namespace {

// The emulated legacy handle's bytes: where the exporter's memfd is (its process and fd).
struct LegacyHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t id;
};
constexpr uint32_t kLegacyMagic = 0x53454c31;  // "SEL1"
static_assert(sizeof(LegacyHandle) <= IpcHandle::kLegacyBytes);

}  // namespace

void* EmulatedMemory::alloc(size_t bytes) { return regions_.alloc(bytes, MemoryKind::device); }

void* EmulatedMemory::host_alloc(size_t bytes) {
  lock_.need("host_alloc (pinned host memory: cuMemHostRegister)");
  return regions_.alloc(bytes, MemoryKind::host);
}

void EmulatedMemory::synchronize_device(const char* call) {
  lock_.hold_while(call, "the device's queued work", [&] {
    if (synchronize_device_) synchronize_device_();
  });
}

void EmulatedMemory::free(void* ptr) {
  if (ptr) synchronize_device("free (device memory: cuCtxSynchronize first, as cudaFree)");
  release(ptr, MemoryKind::device, Origin::allocated, "free");
}

void EmulatedMemory::host_free(void* ptr) {
  if (ptr) lock_.need("host_free (pinned host memory: cuMemHostUnregister)");
  release(ptr, MemoryKind::host, Origin::allocated, "host_free");
}

void* EmulatedMemory::foreign_alloc(size_t bytes) {
  // cudaMalloc may synchronize the device (the CUDA guide's implicit synchronization).
  synchronize_device("a program's cudaMalloc");
  return regions_.alloc(bytes, MemoryKind::device, Origin::foreign);
}

void EmulatedMemory::foreign_free(void* ptr) {
  if (!ptr) return;
  synchronize_device("a program's cudaFree");
  release(ptr, MemoryKind::device, Origin::foreign, "cudaFree");
}

void EmulatedMemory::release(void* ptr, MemoryKind kind, Origin origin, const char* call) {
  if (!ptr) return;
  if (!regions_.remove(ptr, kind, origin)) refuse_free(call, ptr, query(ptr), kind);
}

PointerInfo EmulatedMemory::query(const void* ptr) {
  RegionRef r = regions_.find(ptr);
  if (!r) return PointerInfo{};
  // The CUDA backend asks the driver about memory it did not allocate.
  if (r->origin == Origin::foreign)
    lock_.need("query of device memory the backend did not allocate (cuPointerGetAttributes)");
  return r->info();
}

IpcHandle EmulatedMemory::export_handle(void* base) {
  RegionRef r = regions_.find(base);
  if (!r || r->origin != Origin::foreign) return regions_.export_handle(base);
  if (r->base != base)
    throw InvalidArgument("export: " + address_text(base) + " is inside an allocation, not its start (" +
                          address_text(r->base) + ")");
  lock_.need("export of device memory the backend did not allocate (cudaIpcGetMemHandle)");
  LegacyHandle h{kLegacyMagic, static_cast<int32_t>(::getpid()), r->fd, 0, r->id};
  uint8_t bytes[IpcHandle::kLegacyBytes] = {};
  std::memcpy(bytes, &h, sizeof h);
  return IpcHandle::from_legacy(bytes, MemoryKind::device, r->length);
}

void* EmulatedMemory::import_handle(const IpcHandle& handle) {
  if (handle.type() != IpcHandle::Type::legacy) return regions_.import_handle(handle);
  lock_.need("import of a legacy IPC handle (cudaIpcOpenMemHandle)");
  LegacyHandle h{};
  std::memcpy(&h, handle.legacy().data(), sizeof h);
  if (h.magic != kLegacyMagic) throw InvalidArgument("import: the legacy handle is not the emulated backend's");
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw SystemError("import of a legacy IPC handle: open " + path + ": " + std::strerror(errno));
  void* p = regions_.import_handle(IpcHandle::from_fd(fd, MemoryKind::device, handle.length()));
  std::lock_guard lk(legacy_m_);
  legacy_imports_.insert(p);
  return p;
}

void EmulatedMemory::unimport(void* ptr) {
  RegionRef r = regions_.find(ptr);
  const PointerInfo info = r ? r->info() : PointerInfo{};
  bool legacy = false;
  {
    std::lock_guard lk(legacy_m_);
    legacy = legacy_imports_.count(ptr) != 0;
  }
  if (legacy) lock_.need("unimport of a legacy IPC mapping (cudaIpcCloseMemHandle)");
  if (!r || r->base != ptr || r->origin != Origin::imported || !regions_.remove(ptr, r->kind, Origin::imported))
    throw InvalidArgument("unimport: " + address_text(ptr) + " is not the address of an imported allocation" +
                          (info.origin == Origin::allocated ? " (it was allocated here: free it)" : ""));
  std::lock_guard lk(legacy_m_);
  legacy_imports_.erase(ptr);
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
