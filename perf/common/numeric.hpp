// Host-side numbers for data fill and validation: IEEE half and bfloat16 conversions,
// and reading/writing an element of any element type as a double.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/types.hpp"

namespace perf {

using strata::DataType;

uint16_t float_to_half(float f);  // round to nearest even; overflow -> inf
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);  // round to nearest even
float bf16_to_float(uint16_t b);

// Integer types wrap like two's complement (the value is converted through int64 /
// uint64), floating types round to nearest. `v` must be finite for integer types.
void store(DataType t, void* buf, size_t index, double v);
double load(DataType t, const void* buf, size_t index);

// v rounded into type t and back: what a correct implementation can produce.
double round_to(DataType t, double v);

// Unit roundoff of a floating type (2^-p); 0 for integer types.
double epsilon(DataType t);

}  // namespace perf
