// A GPT-2-style decoder with explicit forward and backward over one flat parameter buffer:
// token + position embeddings, pre-LayerNorm blocks (causal multi-head attention, GELU
// MLP, residual connections), a final LayerNorm and an output head tied to the token
// embedding.
//
// One Gpt is one pipeline chunk (a run of layers, with the embedding on the first chunk
// and the head on the last) on this rank's tensor-parallel piece of each tensor (Megatron:
// attention by heads, the MLP by its hidden units, the vocabulary of wte and the head);
// the serial model is the chunk of every layer on one rank. It runs one microbatch at a
// time on an Activations, which holds what forward keeps for backward, so that a pipeline
// can have several microbatches in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "device/buffer.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "tensor_parallel.hpp"
#include "weights.hpp"

namespace strata::train {

// Whoever owns gradient memory. Backward asks for a tensor's gradient buffer (zeroed at
// the start of each step; backward accumulates into it) and says when a suffix of the
// tensors is final, which is when data parallelism may start reducing it.
class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual float* grad(int tensor) = 0;
  // Every tensor with id >= `tensor` that this rank holds has its final gradient for
  // this step (as far as this microbatch goes).
  virtual void ready_from(int tensor) = 0;
};

// GPT-2's initialisation: N(0, 0.02) matrices and embeddings, N(0, 0.02/sqrt(2L)) for the
// projections into the residual stream, zero biases, LayerNorm weights one. Each tensor
// is drawn whole from its own stream of `seed` and this rank keeps its piece, so the
// values depend on neither the layout nor the tensor-parallel cut.
void init_params(const ParamLayout& layout, float* params, uint64_t seed);
// The same for one tensor: this rank's piece of tensor `id`, into `piece`.
void init_tensor(const ParamLayout& layout, int id, uint64_t seed, float* piece);

// The layer-group sets (weights.hpp) a forward or a backward of `chunk` opens, in order:
// the embeddings, each block, and the head's final LayerNorm with the tied wte (forward);
// the head's, then each block from the last (backward; the embedding's backward reads no
// parameter).
WeightUses weight_uses(const ModelConfig& c, const Chunk& chunk, bool forward);

class Gpt {
 public:
  struct Layer;
  struct Activations;

  // Scratch is sized for microbatches of up to max_batch sequences of ctx tokens.
  // recompute (--recompute block): forward keeps only each block's input (and output),
  // and backward computes the block's forward again before its backward.
  Gpt(const ParamLayout& layout, const Chunk& chunk, Weights& weights, const Kernels& k, TensorParallel& tp,
      int max_batch, bool recompute = false);
  ~Gpt();

  const Chunk& chunk() const { return chunk_; }
  const Kernels& kernels() const { return k_; }  // the memory its tensors are in
  std::unique_ptr<Activations> make_activations() const;
  size_t activation_bytes() const;  // of one microbatch
  size_t recompute_bytes() const { return redo_.bytes(); }  // the one block recomputed at a time

  // One microbatch: tokens/targets [B, T], T <= ctx, the same on every tensor-parallel
  // rank. A chunk without the embedding reads its input from a.input(). Returns the mean
  // cross-entropy on the last chunk when targets are given (else 0); probs(a) then holds
  // the next-token distribution over this rank's slice of the vocabulary.
  float forward(Activations& a, const int* tokens, const int* targets, int B, int T);
  // Backward of a's microbatch (forward must have had targets), the loss scaled by
  // loss_scale. A chunk without the head starts from a.grad(), the gradient of its output;
  // afterwards a.grad() holds the gradient of its input.
  void backward(Activations& a, GradSink& sink, float loss_scale);

 private:
  const float* param(int tensor) const { return w_.tensor(tensor); }
  const float* lp(int layer, LayerTensor t) const { return param(tensor_layer(layer, t)); }
  size_t carve(Activations& a, float* base) const;
  // What a block keeps from forward for backward, at `base` (nothing when null); with
  // `output` false all but its output (the next block's input). Returns the floats it takes.
  size_t carve_layer(Layer& l, float* base, bool output) const;
  // Block li's forward of a's microbatch from x into l.
  void block_forward(Activations& a, int li, Layer& l, const float* x);
  // The group of block li.
  std::vector<int> block_group(int li) const { return {1 + li}; }

  const ParamLayout& layout_;
  Chunk chunk_;
  Weights& w_;
  const Kernels& k_;
  TensorParallel& tp_;
  ModelConfig cfg_;
  int max_batch_;
  int C_, Cl_, NHl_, Vl_, vocab_start_;  // widths, and this rank's share of each
  // Scratch shared by all microbatches: a row-parallel layer's partial sums (forward) or
  // a column-parallel layer's input gradient (backward), and backward's intermediates.
  Buffer<float> scratch_;
  float *partial_, *dfull_, *dln_, *d4c_, *dqkv_, *datty_, *datt_;
  // --recompute block: one block's intermediates, shared by every microbatch (forward
  // writes them and drops them; backward fills them again), with an output of its own.
  bool recompute_;
  Buffer<float> redo_;
  float* redo_base_ = nullptr;
};

// What one block's forward computes; backward reads all of it but the output res3.
struct Gpt::Layer {
  float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2;
  float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
};

struct Gpt::Activations {
  using Layer = Gpt::Layer;
  // The residual stream entering and leaving the chunk, and its gradient: this rank's
  // rows (all of them, or its run under sequence parallelism), `row_floats` floats each.
  float* input() { return x; }
  const float* output() const { return layers.empty() ? x : layers.back().res3; }
  float* grad() { return dres; }
  size_t row_floats(int B, int T) const;
  const float* probs() const { return logits; }  // in the device's memory
  size_t bytes() const { return buf.bytes(); }

  // Everything lives in the kernels' memory, the microbatch's tokens too.
  Buffer<float> buf;
  std::vector<Layer> layers;
  float *x, *lnf, *lnf_mean, *lnf_rstd, *logits, *losses, *maxes, *sums, *dres;
  Buffer<int> tokens, targets;
  int B = 0, T = 0, width = 0;
  bool have_targets = false;
  const TensorParallel* tp = nullptr;
};

}  // namespace strata::train
