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
};

}  // namespace strata::train
