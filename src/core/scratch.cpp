#include "core/scratch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "ground/device/backend.hpp"
#include "ground/device/memfd_regions.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
// Host scratch is memfd memory, shareable like strata::alloc's (ground/device/shared_host):
// what a plan sends from scratch (partial sums, forwarded blocks) is then read in place by
// the peer as well (docs/transports.md, "Zero-copy").
device::MemfdRegions& host_scratch() {
  static auto* regions = new device::MemfdRegions;  // kept until exit, as communicators may be
  return *regions;
}
}  // namespace

void Scratch::Free::operator()(void* p) const {
  if (kind == MemoryKind::host) host_scratch().remove(p, MemoryKind::host, device::Origin::allocated);
  else if (device::Backend* b = device::loaded_backend()) b->memory().free(p);
}

void* Scratch::grow(MemoryKind kind, size_t bytes) {
  Block& b = blocks_[static_cast<size_t>(kind)];
  if (kind == MemoryKind::device) {
    device::Memory& m = device::require_backend("scratch memory for a call on device memory").memory();
    bytes = std::max(bytes, 2 * b.bytes);
    std::unique_ptr<void, Free> grown(m.alloc(bytes), Free{kind});
    if (b.p) retired_.push_back(std::move(b.p));
    b.p = std::move(grown);
    b.bytes = bytes;
    return b.p.get();
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + page - 1) / page * page;
  b.p.reset();  // the old block goes first: nothing in it is kept
  b.bytes = 0;
  void* p = host_scratch().alloc(rounded, MemoryKind::host);
  b.p.reset(p);
  b.bytes = rounded;
  return p;
}

}  // namespace strata
