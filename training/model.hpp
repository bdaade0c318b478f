// A GPT-2-style decoder with explicit forward and backward over one flat parameter buffer:
// token + position embeddings, pre-LayerNorm blocks (causal multi-head attention, GELU
// MLP, residual connections), a final LayerNorm and an output head tied to the token
// embedding. Activations for backward are kept in one preallocated buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels.hpp"
#include "layout.hpp"

namespace strata::train {

// Whoever owns gradient memory. Backward asks for a tensor's gradient buffer (zeroed at
// the start of each backward; backward accumulates into it) and says when a suffix of the
// tensors is final, which is when data parallelism may start reducing it.
class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual float* grad(int tensor) = 0;
  // Every tensor with id >= `tensor` has its final gradient for this step.
  virtual void ready_from(int tensor) = 0;
};

// GPT-2's initialisation: N(0, 0.02) matrices and embeddings, N(0, 0.02/sqrt(2L)) for the
// projections into the residual stream, zero biases, LayerNorm weights one. Each tensor
// draws from its own stream of `seed`, so the values do not depend on the layout.
void init_params(const ParamLayout& layout, float* params, uint64_t seed);

class Gpt {
 public:
  // Activations are sized for up to max_batch sequences of config().ctx tokens.
  Gpt(const ParamLayout& layout, const float* params, const Kernels& k, int max_batch);

  // tokens/targets: [B, T], T <= ctx. Returns the mean cross-entropy when targets are given.
  // Afterwards probs() holds the next-token distribution for every position.
  float forward(const int* tokens, const int* targets, int B, int T);
  // Gradient of the mean loss of the last forward (which must have had targets).
  void backward(GradSink& sink);

  const float* probs() const { return probs_; }
  size_t activation_bytes() const { return acts_.size() * sizeof(float); }

 private:
  struct Layer {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
  };
  const float* param(int tensor) const { return params_ + layout_.tensor(tensor).offset; }
  const float* lp(int layer, LayerTensor t) const { return param(tensor_layer(layer, t)); }

  const ParamLayout& layout_;
  const float* params_;
  const Kernels& k_;
  ModelConfig cfg_;
  int max_batch_;

  std::vector<float> acts_;
  std::vector<Layer> layers_;
  float *encoded_, *lnf_, *lnf_mean_, *lnf_rstd_, *probs_, *losses_;
  float *dres_, *dc_, *d4c_, *dqkv_, *datt_;  // backward scratch, reused by every layer

  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  std::vector<int> tokens_, targets_;
};

}  // namespace strata::train
