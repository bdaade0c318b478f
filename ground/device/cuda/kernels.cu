#include "ground/device/cuda/kernels.hpp"

#include <algorithm>
#include <cstdint>

#include "ground/device/cuda/check.hpp"
#include "ground/device/execution.hpp"
#include "ground/device/functors.hpp"

namespace strata::device::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 4;

// The sources' addresses travel in the kernel's parameters.
struct Sources {
  const void* p[kMaxReduceSources];
};

template <typename E>
union Pack {
  uint4 raw;
  typename E::Storage e[16 / sizeof(typename E::Storage)];
};

// Elements [0, nvec * per) 16 bytes at a time, the rest one by one.
template <typename E, typename Op>
__global__ void reduce_kernel(void* dst, Sources srcs, int nsrc, size_t count, size_t nvec) {
  using S = typename E::Storage;
  constexpr int per = 16 / sizeof(S);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  Op op;
  for (size_t v = first; v < nvec; v += stride) {
    Pack<E> in;
    in.raw = static_cast<const uint4*>(srcs.p[0])[v];
    typename E::Acc acc[per];
#pragma unroll
    for (int j = 0; j < per; ++j) acc[j] = E::load(in.e[j]);
    for (int k = 1; k < nsrc; ++k) {
      in.raw = static_cast<const uint4*>(srcs.p[k])[v];
#pragma unroll
      for (int j = 0; j < per; ++j) acc[j] = op(acc[j], E::load(in.e[j]));
    }
    Pack<E> out;
#pragma unroll
    for (int j = 0; j < per; ++j) out.e[j] = E::store(acc[j]);
    static_cast<uint4*>(dst)[v] = out.raw;
  }
  for (size_t i = nvec * per + first; i < count; i += stride)
    static_cast<S*>(dst)[i] = elementwise::reduce_at<E, Op>(reinterpret_cast<const S* const*>(srcs.p), nsrc, i);
}

template <typename E>
__global__ void divide_kernel(void* buf, size_t count, int by) {
  auto* p = static_cast<typename E::Storage*>(buf);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    p[i] = elementwise::divide<E>(p[i], by);
}

unsigned blocks_for(size_t work, int sm_count) {
  const size_t want = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min<size_t>(want, static_cast<size_t>(sm_count) * kBlocksPerSm)));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
                   cudaStream_t stream, int sm_count) {
  if (count == 0) return;
  Sources s{};
  bool aligned = aligned16(dst);
  for (int k = 0; k < nsrc; ++k) s.p[k] = srcs[k], aligned = aligned && aligned16(srcs[k]);
  elementwise::with_element(type, [&](auto e) {
    elementwise::with_op(op, [&](auto o) {
      using E = decltype(e);
      constexpr size_t per = 16 / sizeof(typename E::Storage);
      const size_t nvec = aligned ? count / per : 0;
      const size_t work = nvec + (count - nvec * per);
      reduce_kernel<E, decltype(o)><<<blocks_for(work, sm_count), kThreads, 0, stream>>>(dst, s, nsrc, count, nvec);
    });
  });
  check(cudaGetLastError(), "reduce kernel launch");
}

void load_kernels() {
  for (int t = 0; t < kNumDataTypes; ++t) {
    elementwise::with_element(static_cast<DataType>(t), [&](auto e) {
      using E = decltype(e);
      cudaFuncAttributes attributes{};
      for (int o = 0; o < kNumReduceOps; ++o)
        elementwise::with_op(static_cast<ReduceOp>(o), [&](auto op) {
          check(cudaFuncGetAttributes(&attributes, reduce_kernel<E, decltype(op)>),
                "cudaFuncGetAttributes (reduce kernel)");
        });
      check(cudaFuncGetAttributes(&attributes, divide_kernel<E>), "cudaFuncGetAttributes (divide kernel)");
    });
  }
}

void launch_divide(void* dst, size_t count, DataType type, int nranks, cudaStream_t stream, int sm_count) {
  if (count == 0) return;
  elementwise::with_element(type, [&](auto e) {
    divide_kernel<decltype(e)><<<blocks_for(count, sm_count), kThreads, 0, stream>>>(dst, count, nranks);
  });
  check(cudaGetLastError(), "divide kernel launch");
}

namespace {
__global__ void program_copy_kernel(uint32_t* dst, const uint32_t* src, size_t words) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) dst[i] = src[i];
}
}  // namespace

void launch_program_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const size_t words = bytes / 4;
  if (words == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((words + kThreads - 1) / kThreads, 1024));
  program_copy_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src),
                                                        words);
  check(cudaGetLastError(), "program copy kernel launch");
}

}  // namespace strata::device::cuda
