// One call of matrix products, as both backends take it: C = alpha op(A) op(B) + beta C
// with row-major matrices (cblas_sgemm's CblasRowMajor meaning of the transposes and
// leading dimensions), done `batch` times, matrix i of each at i * its stride (floats).
// C++17: nvcc compiles this too.
#pragma once

#include <cstddef>

namespace strata::train {

struct Gemm {
  bool trans_a, trans_b;
  int M, N, K;  // C is M x N; op(A) M x K; op(B) K x N
  float alpha;
  const float* A;
  int lda;
  size_t stride_a;
  const float* B;
  int ldb;
  size_t stride_b;
  float beta;
  float* C;
  int ldc;
  size_t stride_c;
  int batch;

  // The floats each operand spans over the batch, from its first element to its last: all
  // that a copy or a conversion of it (CUDA's bf16 operands) may touch. Not rows x ld,
  // which runs past the end of a buffer whose matrices are views with a wider leading
  // dimension (attention's q, k and v, in the last sequence's qkv rows).
  size_t span_a() const { return span(trans_a ? K : M, trans_a ? M : K, lda, stride_a); }
  size_t span_b() const { return span(trans_b ? N : K, trans_b ? K : N, ldb, stride_b); }
  size_t span_c() const { return span(M, N, ldc, stride_c); }

 private:
  size_t span(int rows, int cols, int ld, size_t stride) const {
    return static_cast<size_t>(batch - 1) * stride + static_cast<size_t>(rows - 1) * ld + static_cast<size_t>(cols);
  }
};

}  // namespace strata::train
