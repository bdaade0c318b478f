#include "core/scratch.hpp"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"

namespace strata {

void Scratch::Free::operator()(void* p) const {
  if (kind == MemoryKind::host) std::free(p);
  else if (device::Backend* b = device::loaded_backend()) b->memory().free(p);
}

void* Scratch::grow(MemoryKind kind, size_t bytes) {
  Block& b = blocks_[static_cast<size_t>(kind)];
  if (kind == MemoryKind::device) {
    device::Memory& m = device::require_backend("scratch memory for a call on device memory").memory();
    b.p.reset();
    b.bytes = 0;
    b.p = std::unique_ptr<void, Free>(m.alloc(bytes), Free{kind});
    b.bytes = bytes;
    return b.p.get();
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + page - 1) / page * page;
  b.p.reset();  // the old block goes first: nothing in it is kept
  b.bytes = 0;
  void* p = std::aligned_alloc(page, rounded);
  if (!p) throw std::bad_alloc();
  b.p.reset(p);
  b.bytes = rounded;
  return p;
}

}  // namespace strata
