#include "step_grads.hpp"

namespace strata::train {

StepGrads::StepGrads(GradSink& inner, const ParamLayout& layout, TensorParallel& tp,
                     Group* embedding, StepClock& clock)
    : inner_(inner), layout_(layout), tp_(tp), embedding_(embedding), clock_(clock) {}

void StepGrads::begin_step() {
  final_from_ = tensor_count(layout_.config());
  last_ = true;
}

void StepGrads::ready_from(int tensor) {
  if (!last_ || tensor >= final_from_) return;
  if (tp_.sequence_parallel())
    for (int id = tensor; id < final_from_; ++id)
      if (layout_.holds(id) && layout_.tensor(id).layernorm)
        tp_.all_reduce(inner_.grad(id), layout_.tensor(id).size, strata::ReduceOp::sum);
  final_from_ = tensor;
  // The tied embedding (tensor 0) waits for its other copy: see backward_done.
  inner_.ready_from(embedding_ && tensor == 0 ? 1 : tensor);
}

void StepGrads::backward_done() {
  last_ = true;
  ready_from(0);
  if (embedding_ && layout_.holds(tensor_wte())) {
    const size_t n = layout_.tensor(tensor_wte()).size;
    float* g = inner_.grad(tensor_wte());
    clock_.comm([&] { embedding_->all_reduce(g, g, n, strata::ReduceOp::sum).wait(); });
  }
  inner_.ready_from(0);
}

}  // namespace strata::train
