// The emulated device backend (docs/device.md): device memory that host code cannot
// touch, streams that are threads, the same functors as the GPU's kernels. Always built.
#pragma once

#include <memory>

#include "ground/device/backend.hpp"

namespace strata::device::emulated {

// delay_us: each stream sleeps a random 0..delay_us µs before each task
// (STRATA_EMULATED_DELAY_US for the process's backend).
std::unique_ptr<Backend> make_backend(unsigned delay_us);

}  // namespace strata::device::emulated
