// A communicator's scratch memory, what plans address as Buf::scratch: one block per memory
// kind, grown to the largest call so far and never shrunk; its contents do not outlive a
// call. Host blocks are page-aligned memfd memory that peers on the node can map (so sends
// from scratch are read in place too, docs/transports.md "Zero-copy"); device blocks come from the device backend's memory
// (ground/device).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "ground/memory_kind.hpp"

namespace strata {

class Scratch {
 public:
  // At least `bytes` of `kind` memory (null while nothing was asked for). A larger request
  // replaces the block without keeping what it held. Device memory without a device
  // backend: InvalidUsage.
  void* get(MemoryKind kind, size_t bytes) {
    Block& b = blocks_[static_cast<size_t>(kind)];
    return bytes <= b.bytes ? b.p.get() : grow(kind, bytes);
  }

 private:
  void* grow(MemoryKind kind, size_t bytes);
  struct Free {
    MemoryKind kind;  // no initializer (a nested class with one is not default-constructible yet); value-initialized: host
    void operator()(void* p) const;
  };
  struct Block {
    std::unique_ptr<void, Free> p;
    size_t bytes = 0;
  };
  std::array<Block, kNumMemoryKinds> blocks_;
  // Device blocks outgrown, freed with the communicator: a device free waits for every
  // stream (as cudaFree does), and it would run on the worker while the call's own stream
  // is held until the call ends. Blocks at least double, so these add up to less than the
  // block in use.
  std::vector<std::unique_ptr<void, Free>> retired_;
};

}  // namespace strata
