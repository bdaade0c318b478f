// The message sizes of a run, as nccl-tests steps them: from minbytes while <= maxbytes,
// multiplying by stepfactor when it is > 1, else adding stepbytes.
#pragma once

#include <cstdint>
#include <vector>

namespace perf {

// A zero size with a factor step is listed once (it would never grow); the list stops
// before a step would overflow.
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                 uint64_t step_factor);

}  // namespace perf
