// The CUDA backend's kernels (kernels.cu): the functors of ground/device/functors.hpp over
// 16 bytes per thread where every pointer is 16-byte aligned, one element per thread
// otherwise, in a grid-stride loop. Nothing is allocated per call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "strata/types.hpp"

namespace strata::device::cuda {

// dst = srcs[0] op ... op srcs[nsrc-1] (1 <= nsrc <= kMaxReduceSources; avg: sum).
void launch_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
                   cudaStream_t stream, int sm_count);
// dst[i] = dst[i] / nranks (avg's finalize).
void launch_divide(void* dst, size_t count, DataType type, int nranks, cudaStream_t stream, int sm_count);

}  // namespace strata::device::cuda
