#include "sweep.hpp"

#include <limits>

namespace perf {

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                 uint64_t step_factor) {
  std::vector<uint64_t> sizes;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (uint64_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    if (step_factor > 1) {
      if (size == 0 || size > kMax / step_factor) break;
      size *= step_factor;
    } else {
      if (step_bytes == 0 || size > kMax - step_bytes) break;
      size += step_bytes;
    }
  }
  return sizes;
}

}  // namespace perf
