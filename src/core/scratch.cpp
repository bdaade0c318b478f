#include "core/scratch.hpp"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "strata/error.hpp"

namespace strata {

void Scratch::Free::operator()(void* p) const { std::free(p); }

void* Scratch::grow(MemoryKind kind, size_t bytes) {
  Block& b = blocks_[static_cast<size_t>(kind)];
  if (kind != MemoryKind::host)
    throw InvalidUsage(std::string("scratch memory for a call on ") + name(kind) +
                       " memory needs the device layer (ground/device), which this build does not have yet");
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
