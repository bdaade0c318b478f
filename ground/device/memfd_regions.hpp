// Allocations backed by one memfd each, so another process can map them (export: the
// fd, the shape of CUDA's cuMem POSIX-fd handles). Host memory is one read-write
// mapping. Emulated device memory is two mappings of the memfd: the address users get is
// PROT_NONE (host code touching it crashes, as on a GPU), and the backend's tasks reach
// the bytes through a read-write "shadow". Both backends keep their pinned host memory
// here; the emulated backend its device memory too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ground/device/ipc_handle.hpp"
#include "ground/device/memory.hpp"
#include "ground/device/range_map.hpp"

namespace strata::device {

// A process-unique allocation id (never 0, never reused): every backend numbers its
// allocations and imports from this one counter.
uint64_t next_allocation_id();

// One mapping of a memfd; unmapped (and the fd closed) when the last reference goes, so a
// task still holding one keeps the memory valid after free().
struct MemfdRegion {
  char* base = nullptr;    // what users see
  char* shadow = nullptr;  // the read-write bytes (== base for host memory)
  size_t length = 0;
  int fd = -1;
  uint64_t id = 0;
  MemoryKind kind = MemoryKind::host;
  Origin origin = Origin::allocated;

  MemfdRegion() = default;
  MemfdRegion(const MemfdRegion&) = delete;
  MemfdRegion& operator=(const MemfdRegion&) = delete;
  ~MemfdRegion();
  PointerInfo info() const { return {kind, origin, base, length, id}; }
};
using RegionRef = std::shared_ptr<const MemfdRegion>;

class MemfdRegions {
 public:
  // A new allocation of `bytes` (rounded up to whole pages; 0 gives nullptr); `origin`
  // foreign: device memory as a program's cudaMalloc makes it (the emulated backend's).
  void* alloc(size_t bytes, MemoryKind kind, Origin origin = Origin::allocated);
  // Maps a handle of type fd (the handle keeps its fd).
  void* import_handle(const IpcHandle& handle);
  // The region starting at `base`, removed, if it is of this kind and origin (nullptr
  // otherwise; nothing is removed then).
  RegionRef remove(const void* base, MemoryKind kind, Origin origin);
  // The region holding p (nullptr: none).
  RegionRef find(const void* p) const;
  // A handle for the allocation starting at `base` (InvalidArgument unless it is one this
  // process allocated).
  IpcHandle export_handle(const void* base) const;

 private:
  RegionRef map(int fd, size_t length, MemoryKind kind, Origin origin);
  RangeMap<RegionRef> regions_;
};

}  // namespace strata::device
