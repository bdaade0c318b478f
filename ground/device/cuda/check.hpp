// CUDA calls that fail become SystemError naming the call and CUDA's error.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "strata/error.hpp"

namespace strata::device::cuda {

[[noreturn]] inline void fail(const char* call, const char* error_name, const char* error_text) {
  throw SystemError(std::string("cuda backend: ") + call + ": " + (error_name ? error_name : "unknown error") + " (" +
                    (error_text ? error_text : "no description") + ")");
}

inline void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  fail(call, name, text);
}

inline void check(cudaError_t r, const char* call) {
  if (r != cudaSuccess) fail(call, cudaGetErrorName(r), cudaGetErrorString(r));
}

}  // namespace strata::device::cuda
