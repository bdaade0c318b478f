// Reduction kernels for CPUs with AVX2 and F16C (compiled with -mavx2 -mf16c; only called
// after reduce.cpp has checked the CPU). fp16 converts with the F16C instructions, whose
// float->half conversion rounds to nearest even; bf16 widens by shifting and rounds to
// nearest even with integer arithmetic, as half.hpp does one value at a time.
#include <immintrin.h>

#define STRATA_ISA avx2
#include "ground/reduce_kernels.hpp"

namespace strata::avx2 {

namespace {
template <typename Op>
__m256 apply(__m256 a, __m256 b) {
  if constexpr (std::is_same_v<Op, Sum>) return _mm256_add_ps(a, b);
  if constexpr (std::is_same_v<Op, Prod>) return _mm256_mul_ps(a, b);
  if constexpr (std::is_same_v<Op, Max>) return _mm256_max_ps(b, a);  // a < b ? b : a, as the scalar Max
  if constexpr (std::is_same_v<Op, Min>) return _mm256_min_ps(b, a);  // b < a ? b : a
}

__m256 bf16x8_to_float(__m128i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)); }

__m128i float_to_bf16x8(__m256 f) {
  __m256i x = _mm256_castps_si256(f);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  // NaN stays a (quiet) NaN instead of rounding into infinity.
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  // Pack the low 16 bits of each 32-bit lane into 8 x uint16.
  __m256i packed = _mm256_packus_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0xffff)), _mm256_setzero_si256());
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}
}  // namespace

__m256 load_half(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
void store_half(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
__m256 load_bf16(const uint16_t* p) { return bf16x8_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
void store_bf16(uint16_t* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), float_to_bf16x8(v)); }

// Eight values at a time through fp32, the tail one at a time with the same rounding.
template <__m256 (*Load)(const uint16_t*), void (*Store)(uint16_t*, __m256), typename E, typename Op>
void kernel16(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) Store(d + i, apply<Op>(Load(x + i), Load(y + i)));
  kernel<E, Op>(d + i, x + i, y + i, n - i);
}

template <typename Op>
void half_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel16<load_half, store_half, Element<DataType::float16>, Op>(dst, a, b, n);
}

template <typename Op>
void bf16_kernel(void* dst, const void* a, const void* b, size_t n) {
  kernel16<load_bf16, store_bf16, Element<DataType::bfloat16>, Op>(dst, a, b, n);
}

ReduceFn reduce_fn(DataType type, ReduceOp op) { return table_lookup(type, op); }

}  // namespace strata::avx2
