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
// Loads every kernel above now. Under CUDA's lazy loading (the default since 12.2) a
// kernel's first launch loads its module, which waits for the device: on the worker of a
// call whose user's stream is held until the call is done, that wait never ends (seen on an
// H200: the first device all_reduce hung in cuLaunchKernel). Called when the backend is made.
void load_kernels();
// dst[i] = dst[i] / nranks (avg's finalize).
void launch_divide(void* dst, size_t count, DataType type, int nranks, cudaStream_t stream, int sm_count);
// A program's own kernel (ProgramCalls::kernel_copy): copies bytes / 4 words. Not loaded
// by load_kernels(), so under lazy loading its first launch loads its module, as the first
// launch of one of PyTorch's kernels does.
void launch_program_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace strata::device::cuda
