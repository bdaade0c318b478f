// FNV-1a (64-bit): the library's one hash of bytes that ranks compare with each other
// (the plan settings, STRATA_CHECK's message lists, the outer sync's fingerprint).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata {

constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// Continues the hash `h` over n more bytes.
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aBasis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Continues `h` over v's 8 bytes, least significant first (the same on every machine).
inline uint64_t fnv1a_u64(uint64_t v, uint64_t h) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return fnv1a(b, sizeof b, h);
}

}  // namespace strata
