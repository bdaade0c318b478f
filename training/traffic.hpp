// Bytes per training step on one rank, per group, by formula, to print next to what the
// groups counted (the size of each collective's whole vector; for the pipeline, what the
// stage sends). With N = b x ctx token rows per microbatch, C the width, M microbatches,
// L the layers of this stage and T the tensor-parallel ranks:
//
//   tensor parallel  M (4L + e + h) N C floats: per layer two all-reduces forward and two
//                    backward (f and g, attention and MLP), one for the embedding (e: the
//                    first stage) and one for the head (h: the last stage), plus the
//                    vocabulary-parallel softmax's max and sums, 3N per microbatch.
//                    With sequence parallelism each all-reduce is an all-gather plus a
//                    reduce-scatter of the same vector: M (8L + 2e + 2h) N C, plus the
//                    LayerNorm gradients summed once per step, (4L + 2h) C.
//   pipeline         per microbatch and chunk, N C (N C / T with sequence parallelism) out
//                    unless last and the same back unless first.
//                    With --recompute block a block's forward collectives run again in its
//                    backward: 2L more per microbatch (4L with sequence parallelism).
//   data parallel    zero 0: an all-reduce of this rank's Ψ; zero 1, 2: a reduce-scatter
//                    and an all-gather of Ψ padded, and the norm's sum (8 bytes); zero 3:
//                    the reduce-scatter, an all-gather of a layer group (padded) each time a
//                    pass opens it -- forward and backward of every microbatch, but not again
//                    for a set of groups opened right after one that held it (the head's,
//                    between a forward and the backward right after it) -- and the norm.
//   embedding        the first and last stage add their wte gradients: V C / T.
//   the whole job    the loss (4 bytes) and, under model parallelism, the norm (8 bytes).
#pragma once

#include <array>
#include <string>

#include "layout.hpp"
#include "options.hpp"
#include "parallel_groups.hpp"

namespace strata::train {

using Traffic = std::array<double, ParallelGroups::kTrafficKinds>;

// dp_is_world: the whole job's communicator also serves as the data-parallel group.
Traffic traffic_formula(const Options& o, const ParamLayout& layout, int stage, bool dp_is_world);
// measured: bytes per step, averaged.
std::string traffic_report(const Options& o, const ParamLayout& layout, int stage, bool dp_is_world,
                           const Traffic& measured);

}  // namespace strata::train
