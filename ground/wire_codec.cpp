#include "ground/wire_codec.hpp"

#include <cmath>
#include <cstring>

#include "ground/half.hpp"

namespace strata {

namespace {

// e2m1 magnitudes (in units of the block's scale) and the midpoints between them.
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
constexpr float kE2m1Mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
constexpr float kTop[kNumWireFormats] = {0, 0, 127.0f, 6.0f};  // largest code, scaled formats

// The block's scale: absmax / top, 0 for an all-zero block, NaN when any value is not finite.
float block_scale(const float* x, float top) {
  float absmax = 0.0f;
  bool finite = true;
  for (size_t i = 0; i < kWireBlock; ++i) {
    finite = finite && std::isfinite(x[i]);
    absmax = std::fmax(absmax, std::fabs(x[i]));
  }
  return finite ? absmax / top : NAN;
}

uint8_t e2m1_code(float x, float scale) {
  const float y = scale > 0 ? std::fabs(x) / scale : 0.0f;
  uint8_t code = 0;
  for (uint8_t i = 0; i < 7; ++i)
    if (y > kE2m1Mid[i] || (y == kE2m1Mid[i] && (i + 1) % 2 == 0)) code = i + 1;  // ties to the even code
  return static_cast<uint8_t>(code | (std::signbit(x) ? 8 : 0));
}

float e2m1_value(uint8_t code, float scale) {
  float m = kE2m1[code & 7] * scale;
  return code & 8 ? -m : m;
}

void encode_block(WireFormat f, const float* x, uint8_t* out) {
  const float scale = block_scale(x, kTop[static_cast<int>(f)]);
  std::memcpy(out, &scale, 4);
  uint8_t* q = out + 4;
  if (f == WireFormat::int8) {
    for (size_t i = 0; i < kWireBlock; ++i) {
      float v = scale > 0 ? std::nearbyint(x[i] / scale) : 0.0f;  // ties to even
      v = std::fmin(127.0f, std::fmax(-127.0f, v));
      q[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
    }
  } else {
    for (size_t i = 0; i < kWireBlock; i += 2)
      q[i / 2] = static_cast<uint8_t>(e2m1_code(x[i], scale) | e2m1_code(x[i + 1], scale) << 4);
  }
}

void decode_block(WireFormat f, const uint8_t* in, float* out) {
  float scale;
  std::memcpy(&scale, in, 4);
  const uint8_t* q = in + 4;
  if (f == WireFormat::int8) {
    for (size_t i = 0; i < kWireBlock; ++i) out[i] = static_cast<float>(static_cast<int8_t>(q[i])) * scale;
  } else {
    for (size_t i = 0; i < kWireBlock; i += 2) {
      out[i] = e2m1_value(q[i / 2] & 15, scale);
      out[i + 1] = e2m1_value(q[i / 2] >> 4, scale);
    }
  }
}

}  // namespace

void wire_encode(WireFormat f, const float* x, size_t n, uint8_t* out) {
  switch (f) {
    case WireFormat::fp32: std::memcpy(out, x, n * 4); return;
    case WireFormat::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b = float_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case WireFormat::int8:
    case WireFormat::fp4: {
      const size_t bytes = kWireFormats[static_cast<int>(f)].block_bytes;
      for (size_t b = 0; b < n / kWireBlock; ++b) encode_block(f, x + b * kWireBlock, out + b * bytes);
      return;
    }
  }
}

void wire_decode(WireFormat f, const uint8_t* in, size_t n, float* out) {
  switch (f) {
    case WireFormat::fp32: std::memcpy(out, in, n * 4); return;
    case WireFormat::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, in + 2 * i, 2);
        out[i] = bf16_to_float(b);
      }
      return;
    case WireFormat::int8:
    case WireFormat::fp4: {
      const size_t bytes = kWireFormats[static_cast<int>(f)].block_bytes;
      for (size_t b = 0; b < n / kWireBlock; ++b) decode_block(f, in + b * bytes, out + b * kWireBlock);
      return;
    }
  }
}

}  // namespace strata
