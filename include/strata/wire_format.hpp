// The formats an outer synchronisation (strata/outer_sync.hpp) can put on the wire: one
// table, shared by the library's codecs, the C API, strata-train's flags and the tests.
// Header-only, like types.hpp.
//
//   fp32  4 bytes per element, exact
//   bf16  2 bytes per element, rounded to nearest even (relative error <= 2^-8)
//   int8  blocks of kWireBlock elements: an fp32 scale (block absmax / 127), then one
//         signed byte per element, round(x / scale); error <= absmax / 254
//   fp4   blocks of kWireBlock elements: an fp32 scale (block absmax / 6), then one
//         4-bit e2m1 code per element (sign, 2 exponent bits, 1 mantissa bit: magnitudes
//         0, 0.5, 1, 1.5, 2, 3, 4, 6 times the scale; OCP MX FP4), rounded to nearest,
//         ties to the even code; error <= absmax / 6
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace strata {

// The numeric values match the C API's strataWireFormat_t.
enum class WireFormat : int { fp32 = 0, bf16 = 1, int8 = 2, fp4 = 3 };
inline constexpr int kNumWireFormats = 4;

// Elements per scaled block (int8, fp4); every exchanged piece is a multiple of it.
inline constexpr size_t kWireBlock = 64;

struct WireFormatInfo {
  const char* name;
  size_t block_bytes;  // bytes that carry kWireBlock elements, scale included
};
// Indexed by WireFormat.
inline constexpr WireFormatInfo kWireFormats[kNumWireFormats] = {
    {"fp32", 4 * kWireBlock},
    {"bf16", 2 * kWireBlock},
    {"int8", 4 + kWireBlock},
    {"fp4", 4 + kWireBlock / 2},
};

inline bool is_valid(WireFormat f) { return static_cast<int>(f) >= 0 && static_cast<int>(f) < kNumWireFormats; }
inline const char* name(WireFormat f) { return is_valid(f) ? kWireFormats[static_cast<int>(f)].name : "invalid"; }
// Bytes on the wire for n elements (n a multiple of kWireBlock).
inline size_t wire_bytes(WireFormat f, size_t n) { return n / kWireBlock * kWireFormats[static_cast<int>(f)].block_bytes; }

inline std::optional<WireFormat> parse_wire_format(std::string_view s) {
  for (int i = 0; i < kNumWireFormats; ++i)
    if (s == kWireFormats[i].name) return static_cast<WireFormat>(i);
  return std::nullopt;
}

}  // namespace strata
