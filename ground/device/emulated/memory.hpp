// The emulated backend's memory: device allocations are memfds whose user mapping is
// PROT_NONE (ground/device/memfd_regions.hpp); tasks reach their bytes through access().
// Device memory a program allocated itself (cudaMalloc's, ProgramCalls::device_malloc) is
// foreign: exported as a legacy handle (the exporting process and the memfd's fd number,
// which the importer opens through /proc, as cudaIpcOpenMemHandle needs no fd passing).
// Which calls need the context lock is docs/device.md's "Blocking rules".
#pragma once

#include <functional>
#include <mutex>
#include <unordered_set>

#include "ground/device/emulated/context_lock.hpp"
#include "ground/device/memfd_regions.hpp"
#include "ground/device/memory.hpp"

namespace strata::device::emulated {

class EmulatedMemory final : public Memory {
 public:
  explicit EmulatedMemory(ContextLock& lock) : lock_(lock) {}

  void* alloc(size_t bytes) override;
  void free(void* ptr) override;
  void* host_alloc(size_t bytes) override;
  void host_free(void* ptr) override;
  PointerInfo query(const void* ptr) override;
  IpcHandle export_handle(void* base) override;
  void* import_handle(const IpcHandle& handle) override;
  void unimport(void* ptr) override;

  // cudaMalloc / cudaFree of a program (ProgramCalls): foreign device memory.
  void* foreign_alloc(size_t bytes);
  void foreign_free(void* ptr);

  // What a task touching [ptr, ptr + bytes) uses: the bytes (a device allocation's
  // shadow, or host memory itself) and the region that keeps them mapped while it runs
  // (nullptr for host memory the backend did not allocate: pageable memory).
  // InvalidArgument naming `what` when the range runs past its device allocation's end.
  struct Access {
    char* bytes;
    RegionRef keep;
  };
  Access access(const void* ptr, size_t bytes, const char* what) const;

  // The whole device's queued work, run (cuCtxSynchronize): what free() waits for, as
  // cudaFree does on a GPU (a free while a stream is held by a flag that only the freeing
  // thread would set then hangs here as it does there). Set by the backend, which owns the
  // streams.
  void on_free(std::function<void()> synchronize_device) { synchronize_device_ = std::move(synchronize_device); }
  // Waits for the whole device holding the context lock, as a blocking call does (`call`
  // names it).
  void synchronize_device(const char* call);

 private:
  void release(void* ptr, MemoryKind kind, Origin origin, const char* call);
  ContextLock& lock_;
  MemfdRegions regions_;
  std::function<void()> synchronize_device_;
  std::mutex legacy_m_;
  std::unordered_set<const void*> legacy_imports_;  // bases mapped from a legacy handle
};

}  // namespace strata::device::emulated
