// The trainer's device kernels on CUDA: FunctorKernels (training/device) with a Launch
// that runs each per-row functor with a block of threads per row (its lanes; sums and
// maxima by warp shuffles, then across the block's warps through shared memory), each
// per-element functor in a grid-stride loop, and the products with cuBLAS on the training
// stream: fp32 (no TF32: cuBLAS's default math) or, with bf16, the operands converted to
// bf16 and multiplied on tensor cores with fp32 accumulation and an fp32 result (the
// master weights, the activations and everything else stay fp32).
//
// Built as libstrata-train-cuda.so beside libstrata-cuda.so (where nvcc is found) and
// loaded by strata-train --device cuda (training/device/choose.cpp). It has not run on a
// GPU yet (docs/training.md, "On a GPU").
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "device/choose.hpp"
#include "device/functor_kernels.hpp"
#include "ground/device/cuda/check.hpp"
#include "ground/half.hpp"

namespace strata::train {
namespace {

using strata::device::cuda::check;

void check_blas(cublasStatus_t r, const char* call) {
  if (r != CUBLAS_STATUS_SUCCESS)
    throw strata::SystemError(std::string("cublas: ") + call + ": " + cublasGetStatusString(r));
}

constexpr int kRowThreads = 256;  // a row's lanes: a multiple of the warp
constexpr int kElementThreads = 256;

// Combines every thread's x; every thread gets the result. All threads of the block must
// call it (the functors call their lanes' sums from uniform control flow).
template <typename T, typename Op>
__device__ T block_reduce(T x, Op op) {
  __shared__ T warp_results[32];
  for (int o = 16; o > 0; o /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // the last call's readers are done with warp_results
  if (threadIdx.x % 32 == 0) warp_results[threadIdx.x / 32] = x;
  __syncthreads();
  T r = warp_results[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) r = op(r, warp_results[w]);
  return r;
}

struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Larger {
  template <typename T> __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};

// A row's lanes: the threads of its block.
struct BlockLanes {
  __device__ int lane() const { return threadIdx.x; }
  __device__ int count() const { return blockDim.x; }
  template <typename T> __device__ T sum(T x) const { return block_reduce(x, Add{}); }
  template <typename T> __device__ T max(T x) const { return block_reduce(x, Larger{}); }
};

template <typename F>
__global__ void rows_kernel(F f, int n) {
  const BlockLanes lanes;
  for (int r = blockIdx.x; r < n; r += gridDim.x) f(r, lanes);
}

template <typename F>
__global__ void elements_kernel(F f, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// fp32 -> bf16 (round to nearest even), for the bf16 products' operands.
struct ToBf16 {
  uint16_t* out;
  const float* in;
  __device__ void operator()(size_t i) const { out[i] = float_to_bf16(in[i]); }
};

class CudaLaunch {
 public:
  CudaLaunch(const OnDevice& d, bool bf16) : d_(d), stream_(static_cast<cudaStream_t>(d.stream())), bf16_(bf16) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check_blas(cublasCreate(&blas_), "cublasCreate");
    check_blas(cublasSetStream(blas_, stream_), "cublasSetStream");
    check_blas(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // fp32 stays fp32
  }
  ~CudaLaunch() {
    cudaStreamSynchronize(stream_);
    for (void* p : {bf16_a_, bf16_b_}) d_.free(p);
    cublasDestroy(blas_);
  }
  CudaLaunch(const CudaLaunch&) = delete;
  CudaLaunch& operator=(const CudaLaunch&) = delete;

  template <typename F>
  void rows(int n, const F& f) const {
    if (n <= 0) return;
    rows_kernel<<<std::min(n, 1 << 20), kRowThreads, 0, stream_>>>(f, n);
    check(cudaGetLastError(), "row kernel launch");
  }

  template <typename F>
  void elements(size_t n, const F& f) const {
    if (n == 0) return;
    const size_t blocks = std::min<size_t>((n + kElementThreads - 1) / kElementThreads, size_t(sms_) * 8);
    elements_kernel<<<static_cast<unsigned>(blocks), kElementThreads, 0, stream_>>>(f, n);
    check(cudaGetLastError(), "element kernel launch");
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets B first.
  void gemm(const Gemm& g) const {
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!bf16_) {
      check_blas(cublasSgemmStridedBatched(blas_, tb, ta, g.N, g.M, g.K, &g.alpha, g.B, g.ldb, g.stride_b, g.A, g.lda,
                                           g.stride_a, &g.beta, g.C, g.ldc, g.stride_c, g.batch),
                 "cublasSgemmStridedBatched");
      return;
    }
    const void* a = to_bf16(g.A, g.span_a(), bf16_a_, cap_a_);
    const void* b = to_bf16(g.B, g.span_b(), bf16_b_, cap_b_);
    check_blas(cublasGemmStridedBatchedEx(blas_, tb, ta, g.N, g.M, g.K, &g.alpha, b, CUDA_R_16BF, g.ldb,
                                          static_cast<long long>(g.stride_b), a, CUDA_R_16BF, g.lda,
                                          static_cast<long long>(g.stride_a), &g.beta, g.C, CUDA_R_32F, g.ldc,
                                          static_cast<long long>(g.stride_c), g.batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (bf16)");
  }

  // Partial sums of about 4096 elements each (at most FunctorKernels' limit).
  size_t reduction_rows(size_t n) const { return (n + 4095) / 4096; }

 private:
  // The first n floats from src as bf16 in `buf` (grown as needed), the layout kept.
  const void* to_bf16(const float* src, size_t n, void*& buf, size_t& cap) const {
    if (cap < n) {
      d_.free(buf);
      buf = d_.alloc(n * sizeof(uint16_t));
      cap = n;
    }
    elements(n, ToBf16{static_cast<uint16_t*>(buf), src});
    return buf;
  }

  const OnDevice& d_;
  cudaStream_t stream_;
  bool bf16_;
  int sms_ = 0;
  cublasHandle_t blas_ = nullptr;
  mutable void *bf16_a_ = nullptr, *bf16_b_ = nullptr;
  mutable size_t cap_a_ = 0, cap_b_ = 0;
};

}  // namespace
}  // namespace strata::train

// strata-train --device cuda: the kernels on the process's CUDA backend.
extern "C" __attribute__((visibility("default"))) strata::train::Kernels* strata_train_cuda_kernels(
    strata::device::Backend* backend, bool bf16) {
  if (!backend || std::string(backend->name()) != "cuda")
    throw strata::InvalidUsage(std::string("libstrata-train-cuda: the device backend is ") +
                               (backend ? backend->name() : "none") + ", not cuda");
  return new strata::train::FunctorKernels<strata::train::CudaLaunch>(*backend, "cuda", bf16);
}
