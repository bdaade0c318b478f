// When a step's gradient of a tensor is final, so that data parallelism may reduce it:
//
//   - after the last microbatch's backward has passed the tensor (before, it still
//     accumulates);
//   - with sequence parallelism, after the LayerNorm gradients, which each
//     tensor-parallel rank computed from its own rows only, are summed over those ranks;
//   - with a pipeline, after the two copies of the tied embedding (the first stage's wte
//     and the last stage's head) have added each other's gradient, as Megatron-LM's
//     embedding group does, so both take the same optimizer step.
//
// Sits between the model (which reports every tensor as it passes it) and GradSync.
#pragma once

#include "group.hpp"
#include "layout.hpp"
#include "pipeline.hpp"
#include "step_clock.hpp"
#include "tensor_parallel.hpp"

namespace strata::train {

class StepGrads final : public StepSink {
 public:
  // embedding: the group of the two stages that hold wte (null without a pipeline).
  StepGrads(GradSink& inner, const ParamLayout& layout, TensorParallel& tp, Group* embedding,
            StepClock& clock);

  void begin_step();
  float* grad(int tensor) override { return inner_.grad(tensor); }
  void ready_from(int tensor) override;
  void last_backward(bool last) override { last_ = last; }
  void backward_done() override;

 private:
  GradSink& inner_;
  const ParamLayout& layout_;
  TensorParallel& tp_;
  Group* embedding_;
  StepClock& clock_;
  bool last_ = true;
  int final_from_ = 0;  // tensors [final_from_, end) are final
};

}  // namespace strata::train
