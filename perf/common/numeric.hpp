// Host-side numbers for data fill and validation: IEEE half, bfloat16 and OCP fp8 (e4m3,
// e5m2) conversions, and reading/writing an element of any element type as a double.
// Written from the formats' definitions, independently of the library's conversions.
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
// OCP fp8: round to nearest even, saturating to the largest finite value (as the library
// and CUDA's __NV_SATFINITE do); NaN -> the format's NaN.
uint8_t double_to_fp8(double v, DataType t);  // t: float8_e4m3 or float8_e5m2
double fp8_to_double(uint8_t code, DataType t);

// Integer types wrap like two's complement (the value is converted through int64 /
// uint64), floating types round to nearest. `v` must be finite for integer types.
void store(DataType t, void* buf, size_t index, double v);
double load(DataType t, const void* buf, size_t index);

// v rounded into type t and back: what a correct implementation can produce.
double round_to(DataType t, double v);

// Unit roundoff of a floating type (2^-p); 0 for integer types.
double epsilon(DataType t);

}  // namespace perf
