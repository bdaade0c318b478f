// Encoding and decoding of the outer synchronisation's wire formats
// (include/strata/wire_format.hpp has the formats and their sizes). Pure functions of
// their input: every rank that decodes the same bytes gets the same floats.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/wire_format.hpp"

namespace strata {

// n: a multiple of kWireBlock. `out` holds wire_bytes(f, n) bytes. A block holding a
// non-finite value decodes (int8, fp4) as NaN throughout, so a diverged replica shows.
void wire_encode(WireFormat f, const float* x, size_t n, uint8_t* out);
void wire_decode(WireFormat f, const uint8_t* in, size_t n, float* out);

}  // namespace strata
