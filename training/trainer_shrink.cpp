// Trainer::go_on_after_failure: strata-train --on-failure shrink (docs/training.md, "A rank
// fails"). Pure data parallelism with zero 0 only: every survivor holds the whole model and
// optimizer state, so nothing is lost with a rank but its slice of each global batch.
//
// The global batch stays what it was: its --dp slices (each the sequences one rank had)
// are dealt to the n survivors in turn (slice s to rank s mod n), each slice run as more
// accumulation microbatches. A microbatch's loss is scaled by n / (dp x microbatches) in
// backward, so that the average over the n survivors of what they hold is the mean over
// the whole batch, as before; the printed loss is already that mean.
#include <cstring>

#include "trainer.hpp"

namespace strata::train {

Trainer::Recovery Trainer::go_on_after_failure() {
  groups_.shrink();  // the failed operations have ended: nothing writes our buffers now
  sync_.abandon();
  if (mid_step_) sampler_ = step_start_;  // that step is taken again
  mid_step_ = false;
  Group& world = groups_.world();
  const int n = world.size(), me = world.rank();

  // A survivor may have completed the step the others failed in (its reductions finished
  // before the rank died): everyone takes the state of the lowest rank furthest on.
  float step = static_cast<float>(step_), furthest = 0, behind = 0, source = 0;
  world.all_reduce(&step, &furthest, 1, strata::ReduceOp::max).wait();
  world.all_reduce(&step, &behind, 1, strata::ReduceOp::min).wait();
  const float candidate = step == furthest ? static_cast<float>(me) : static_cast<float>(n);
  world.all_reduce(&candidate, &source, 1, strata::ReduceOp::min).wait();
  if (behind != furthest) {
    uint64_t where[6] = {static_cast<uint64_t>(step_), sampler_.batches_drawn()};
    std::memcpy(where + 2, sampler_.rng().state(), 4 * sizeof(uint64_t));
    constexpr size_t kWords = 6 * sizeof(uint64_t) / sizeof(float);
    float words[kWords];
    std::memcpy(words, where, sizeof where);
    const int src = static_cast<int>(source);
    world.broadcast(words, kWords, src);
    world.broadcast(params_.data(), params_.size(), src);
    world.broadcast(opt_.m().data(), opt_.m().size(), src);
    world.broadcast(opt_.v().data(), opt_.v().size(), src);
    std::memcpy(where, words, sizeof where);
    step_ = static_cast<int>(where[0]);
    sampler_.restore(where + 2, where[1]);
  }

  // Dealt by data-parallel coordinate, as evaluate() deals the validation slices (the
  // survivors' grid may order them otherwise than their ranks).
  slices_.clear();
  for (int s = groups_.coord(kDp); s < replica_slices_; s += n) slices_.push_back(s);
  inputs_.assign(slices_.size() * static_cast<size_t>(local_batch_) * o_.model.ctx, 0);
  targets_.assign(inputs_.size(), 0);
  build_pipeline(static_cast<int>(slices_.size()) * o_.microbatches,
                 static_cast<float>(n) / static_cast<float>(replica_slices_ * o_.microbatches));
  sync_.rebind(groups_.dp());
  return {step_, n, slices_, behind != furthest ? static_cast<int>(source) : -1};
}

}  // namespace strata::train
