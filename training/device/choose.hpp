// Where strata-train computes (--device host|emulated|cuda): the Kernels of each.
#pragma once

#include <memory>
#include <string>

#include "ground/device/backend.hpp"
#include "kernels.hpp"

namespace strata::train {

// The kernels of `device`, made once and kept until exit. emulated and cuda run on the
// process's device backend (STRATA_DEVICE), which this sets to `device` when the
// environment names none; TrainError when it names another backend, or when the backend
// cannot be used (no GPU, no libstrata-train-cuda.so, ...), naming why.
// bf16: the products on bf16 tensor cores (cuda only).
const Kernels& kernels_for(const std::string& device, bool bf16 = false);
// What --device is when not given: cuda where the process's backend is CUDA (a GPU and
// its driver, as STRATA_DEVICE=auto finds them), else host (also with STRATA_DEVICE=
// emulated: the emulated device is asked for by name).
std::string default_device();

// The device backends' kernels (emulated_kernels.cpp; training/cuda, loaded at run time
// from kCudaKernelsLibrary beside libstrata, which exports kCudaKernelsFactory).
std::unique_ptr<Kernels> emulated_kernels(strata::device::Backend& backend);
inline constexpr const char* kCudaKernelsLibrary = "libstrata-train-cuda.so";
inline constexpr const char* kCudaKernelsFactory = "strata_train_cuda_kernels";
using CudaKernelsFactory = Kernels* (*)(strata::device::Backend* backend, bool bf16);

}  // namespace strata::train
