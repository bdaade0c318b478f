// The benchmark loop shared by all drivers, after nccl-tests' TimeTest/BenchTime:
//
//   per (type, op, root): barrier; warmup iterations at maxbytes, then at minbytes;
//   per size, out of place then in place:
//     fill inputs (when checking); one untimed call; barrier;
//     time `iters` operations back to back, each a blocking call (the backend returns
//       when the operation is complete on this rank; -z adds a barrier after each, and
//       then times as many bare barriers, so the difference is a call's latency);
//     per-op time = elapsed / iters, combined across ranks by -a (avg/min/max/rank 0);
//     check: refill with a fresh seed, one call, count wrong elements against the host
//       reference, sum the counts over ranks.
//   Like nccl-tests, each timed iteration moves its buffers by one message size within
//   the maxbytes allocation (avoids measuring a cache-hot buffer).
//
// Blocking calls (rather than posting all iterations and waiting once) make the time per
// op include each operation's full completion, on every backend alike.
#pragma once

#include <ostream>

#include "backend.hpp"
#include "options.hpp"
#include "results.hpp"

namespace perf {

// Runs the whole sweep. Rank 0 prints the preamble, table and footer to `out` and fills
// `summary` (other ranks fill only what they measured). Returns the exit status: 0, or
// 1 when any result had wrong elements.
int run_benchmark(Backend& backend, const Options& o, RunSummary& summary, std::ostream& out);

}  // namespace perf
