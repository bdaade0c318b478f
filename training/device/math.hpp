// The arithmetic the host kernels and the device functors share: GELU (tanh
// approximation, GPT-2's) and LayerNorm's epsilon, written once for the host kernels
// (kernels_cpu.cpp) and the device functors (functors.hpp), so that the emulated backend
// and CUDA compute what the host computes. Plain arithmetic, no libm call, so that the
// host loops vectorise: glibc's tanhf, and then expf, were a third of a training step as
// scalar calls. Internal linkage, as ground/host_device.hpp explains.
#pragma once

#include <cstdint>

#include "ground/host_device.hpp"

namespace strata::train::math {
namespace {

constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

// e^x to ~2e-7 relative (Cephes' expf polynomial, Cody-Waite reduction). Rounds with the
// 1.5*2^23 trick because floor only vectorises from SSE4.1 on.
STRATA_HD inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;  // comparisons, unlike std::min, become vector min/max
  x = x > 88.0f ? 88.0f : x;
  const float magic = 12582912.0f;
  float n = (x * 1.44269504088896341f + magic) - magic;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * bits_float(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

// Saturates where it should (1 - 2/(huge) = 1, 1 - 2/1 = -1); absolute error ~1e-7.
STRATA_HD inline float tanh_approx(float u) { return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f); }

STRATA_HD inline float gelu(float x) {
  return 0.5f * x * (1.0f + tanh_approx(kGeluScale * (x + 0.044715f * x * x * x)));
}

// d gelu(x) / dx.
STRATA_HD inline float gelu_grad(float x) {
  float th = tanh_approx(kGeluScale * (x + 0.044715f * x * x * x));
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace
}  // namespace strata::train::math
