// The emulated backend's memory: device allocations are memfds whose user mapping is
// PROT_NONE (ground/device/memfd_regions.hpp); tasks reach their bytes through access().
#pragma once

#include <functional>

#include "ground/device/memfd_regions.hpp"
#include "ground/device/memory.hpp"

namespace strata::device::emulated {

class EmulatedMemory final : public Memory {
 public:
  void* alloc(size_t bytes) override;
  void free(void* ptr) override;
  void* host_alloc(size_t bytes) override;
  void host_free(void* ptr) override;
  PointerInfo query(const void* ptr) override;
  IpcHandle export_handle(void* base) override;
  void* import_handle(const IpcHandle& handle) override;
  void unimport(void* ptr) override;

  // What a task touching [ptr, ptr + bytes) uses: the bytes (a device allocation's
  // shadow, or host memory itself) and the region that keeps them mapped while it runs.
  // InvalidArgument naming `what` when the range runs past its device allocation's end.
  struct Access {
    char* bytes;
    RegionRef keep;
  };
  Access access(const void* ptr, size_t bytes, const char* what) const;

  // free() first waits for every stream's queued work, as cudaFree does on a GPU (a free
  // while a stream is held by a flag that only the freeing thread would set then hangs
  // here as it does there). Set by the backend, which owns the streams.
  void on_free(std::function<void()> synchronize_device) { synchronize_device_ = std::move(synchronize_device); }

 private:
  void release(void* ptr, MemoryKind kind, Origin origin, const char* call);
  MemfdRegions regions_;
  std::function<void()> synchronize_device_;
};

}  // namespace strata::device::emulated
