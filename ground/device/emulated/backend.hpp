// The emulated device backend (docs/device.md): device memory that host code cannot
// touch, streams that are threads, the same functors as the GPU's kernels, and CUDA's
// blocking rules (a context lock, pageable copies, the legacy default stream). Always built.
#pragma once

#include <memory>

#include "ground/device/backend.hpp"

namespace strata::device::emulated {

struct Options {
  // Each stream sleeps a random 0..delay_us µs before each task (STRATA_EMULATED_DELAY_US).
  unsigned delay_us = 0;
  // Block as CUDA does (docs/device.md, "Blocking rules"; STRATA_EMULATED_CUDA_RULES).
  bool cuda_rules = true;
  // How long a call waits for the context lock before it says it would hang on a GPU
  // (STRATA_EMULATED_LOCK_WAIT).
  double lock_wait_s = 20;
};

// Options from the STRATA_EMULATED_* settings (what the process's backend uses).
Options options_from_settings();
std::unique_ptr<Backend> make_backend(const Options& options);
// Whether a blocking call of another thread holds `b`'s context lock now (false for a
// backend that is not the emulated one): how a test knows its blocking call is under way.
bool context_lock_held(Backend& b);

}  // namespace strata::device::emulated
