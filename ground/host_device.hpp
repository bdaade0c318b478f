// What lets one function be compiled for the CPU (g++) and for the GPU (nvcc): the
// STRATA_HD qualifier (__host__ __device__ under nvcc, nothing for g++) and bit casts
// that both accept. Functions here are static: each file, and each instruction set a file
// is built for (ground/reduce_avx2.cpp), gets its own copy, so an AVX2 copy can never be
// the one a baseline caller links to.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif

namespace strata {

STRATA_HD static inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

STRATA_HD static inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

}  // namespace strata
