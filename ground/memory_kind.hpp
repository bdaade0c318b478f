// Where a buffer lives (MemoryKind, public: strata/device.hpp) and sets of kinds. Calls
// carry one kind (ground/call.hpp); links say which kinds they can read and write
// (transports/transport.hpp's LinkCaps).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "strata/device.hpp"

namespace strata {

// MemoryKind itself is public (include/strata/device.hpp).
inline constexpr int kNumMemoryKinds = 2;
inline constexpr MemoryKind kAllMemoryKinds[kNumMemoryKinds] = {MemoryKind::host, MemoryKind::device};
inline const char* name(MemoryKind k) { return k == MemoryKind::host ? "host" : "device"; }

class MemoryKinds {
 public:
  constexpr MemoryKinds(std::initializer_list<MemoryKind> kinds) {
    for (MemoryKind k : kinds) bits_ |= bit(k);
  }
  constexpr bool has(MemoryKind k) const { return (bits_ & bit(k)) != 0; }

 private:
  static constexpr uint8_t bit(MemoryKind k) { return static_cast<uint8_t>(1u << static_cast<unsigned>(k)); }
  uint8_t bits_ = 0;
};

}  // namespace strata
