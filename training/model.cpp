#include "model.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "rng.hpp"

namespace strata::train {

void init_tensor(const ParamLayout& layout, int id, uint64_t seed, float* piece) {
  const ModelConfig& c = layout.config();
  const TensorInfo& t = layout.tensor(id);
  std::vector<float> whole(t.full_size, 0.0f);  // biases stay zero
  if (t.layernorm && t.name.ends_with(".weight")) {  // LayerNorm gain
    whole.assign(t.full_size, 1.0f);
  } else if (t.decay) {  // matrices and embeddings
    const bool proj = t.name.ends_with("c_proj.weight");
    const float sd = proj ? 0.02f / std::sqrt(2.0f * c.layers) : 0.02f;
    Rng rng(stream_seed(seed, 1000 + id));
    for (float& w : whole) w = sd * rng.normal();
  }
  layout.whole_to_piece(id, whole.data(), piece);
}

void init_params(const ParamLayout& layout, float* params, uint64_t seed) {
  std::memset(params, 0, layout.padded_size() * sizeof(float));
  for (int id = 0; id < tensor_count(layout.config()); ++id)
    if (layout.holds(id)) init_tensor(layout, id, seed, params + layout.tensor(id).offset);
}

namespace {

// Carves consecutive arrays out of one buffer: first counting (base null), then for real.
struct Carver {
  float* base;
  size_t used = 0;
  float* take(size_t n) {
    float* p = base ? base + used : nullptr;
    used += n;
    return p;
  }
};

}  // namespace

WeightUses weight_uses(const ModelConfig& c, const Chunk& chunk, bool forward) {
  const std::vector<int> head = {c.layers + 1, 0};  // ln_f and the tied wte
  WeightUses u;
  if (forward) {
    if (chunk.embedding) u.push_back({0});
    for (int l = chunk.first_layer; l < chunk.end_layer; ++l) u.push_back({1 + l});
    if (chunk.head) u.push_back(head);
  } else {
    if (chunk.head) u.push_back(head);
    for (int l = chunk.end_layer - 1; l >= chunk.first_layer; --l) u.push_back({1 + l});
  }
  return u;
}

Gpt::Gpt(const ParamLayout& layout, const Chunk& chunk, Weights& weights, const Kernels& k, TensorParallel& tp,
         int max_batch, bool recompute)
    : layout_(layout),
      chunk_(chunk),
      w_(weights),
      k_(k),
      tp_(tp),
      cfg_(layout.config()),
      max_batch_(max_batch),
      C_(cfg_.dim),
      Cl_(cfg_.dim / tp.size()),
      NHl_(cfg_.heads / tp.size()),
      Vl_(cfg_.vocab / tp.size()),
      vocab_start_(tp.rank() * (cfg_.vocab / tp.size())),
      recompute_(recompute) {
  const size_t N = static_cast<size_t>(max_batch) * cfg_.ctx, C = C_;
  const size_t rows = tp.sequence_parallel() ? (N + tp.size() - 1) / tp.size() : N;
  for (int pass = 0; pass < 2; ++pass) {
    Carver s{pass ? scratch_.data() : nullptr};
    partial_ = s.take(N * C);
    dfull_ = s.take(tp.sequence_parallel() ? N * C : 0);
    dln_ = s.take(rows * C);
    d4c_ = s.take(N * 4 * Cl_);
    dqkv_ = s.take(N * 3 * Cl_);
    datty_ = s.take(N * Cl_);
    datt_ = s.take(k.attention_scratch(cfg_.ctx, NHl_));
    if (!pass) scratch_ = Buffer<float>(k, s.used);
  }
  if (recompute && chunk.end_layer > chunk.first_layer) {
    Layer unused;
    redo_ = Buffer<float>(k, carve_layer(unused, nullptr, true));
    redo_base_ = redo_.data();
  }
}

Gpt::~Gpt() = default;

size_t Gpt::Activations::row_floats(int B_, int T_) const {
  return static_cast<size_t>(tp->rows(B_ * T_)) * width;
}

size_t Gpt::carve_layer(Layer& l, float* base, bool output) const {
  const size_t N = static_cast<size_t>(max_batch_) * cfg_.ctx, C = C_;
  const size_t rows = tp_.sequence_parallel() ? (N + tp_.size() - 1) / tp_.size() : N;
  const size_t att = static_cast<size_t>(max_batch_) * NHl_ * cfg_.ctx * cfg_.ctx;
  Carver s{base};
  l.ln1 = s.take(N * C);  // all rows: the input of the column-parallel qkv
  l.ln1_mean = s.take(rows);
  l.ln1_rstd = s.take(rows);
  l.qkv = s.take(N * 3 * Cl_);
  l.att = s.take(att);
  l.atty = s.take(N * Cl_);
  l.res2 = s.take(rows * C);
  l.ln2 = s.take(N * C);
  l.ln2_mean = s.take(rows);
  l.ln2_rstd = s.take(rows);
  l.fch = s.take(N * 4 * Cl_);
  l.fch_gelu = s.take(N * 4 * Cl_);
  l.res3 = output ? s.take(rows * C) : nullptr;
  return s.used;
}

// Lays out one microbatch's activations from `base` (nothing when null) and returns the
// floats they take. With recompute a block keeps only its output here (the next block's
// input); its intermediates are the shared redo_ buffer's.
size_t Gpt::carve(Activations& a, float* base) const {
  const size_t N = static_cast<size_t>(max_batch_) * cfg_.ctx, C = C_;
  const size_t rows = tp_.sequence_parallel() ? (N + tp_.size() - 1) / tp_.size() : N;
  Carver s{base};
  a.layers.resize(chunk_.end_layer - chunk_.first_layer);
  a.x = s.take(rows * C);
  for (auto& l : a.layers) {
    if (recompute_) {
      carve_layer(l, redo_base_, false);
      l.res3 = s.take(rows * C);
    } else {
      s.take(carve_layer(l, s.take(0), true));
    }
  }
  const bool head = chunk_.head;
  a.lnf = s.take(head ? N * C : 0);
  a.lnf_mean = s.take(head ? rows : 0);
  a.lnf_rstd = s.take(head ? rows : 0);
  a.logits = s.take(head ? N * Vl_ : 0);
  a.losses = s.take(head ? N : 0);
  a.maxes = s.take(head ? N : 0);
  a.sums = s.take(head ? 2 * N : 0);
  a.dres = s.take(rows * C);
  return s.used;
}

size_t Gpt::activation_bytes() const {
  Activations a;
  return carve(a, nullptr) * sizeof(float);
}

std::unique_ptr<Gpt::Activations> Gpt::make_activations() const {
  auto a = std::make_unique<Activations>();
  a->buf = Buffer<float>(k_, carve(*a, nullptr));
  carve(*a, a->buf.data());
  const size_t tokens = static_cast<size_t>(max_batch_) * cfg_.ctx;
  a->tokens = Buffer<int>(k_, tokens);
  a->targets = Buffer<int>(k_, tokens);
  a->width = C_;
  a->tp = &tp_;
  return a;
}

void Gpt::block_forward(Activations& a, int li, Layer& l, const float* x) {
  const int N = a.B * a.T, C = C_, Cl = Cl_;
  const int rows = tp_.rows(N);
  const size_t mine = static_cast<size_t>(tp_.first_row(N)) * C;  // this rank's rows
  const bool rank0 = tp_.rank() == 0;  // adds the biases of row-parallel layers, once
  // Attention: LayerNorm of this rank's rows, all rows gathered (f), qkv of this rank's
  // heads (column-parallel), their output projected (row-parallel) and summed (g).
  k_.layernorm_forward(l.ln1 + mine, l.ln1_mean, l.ln1_rstd, x, lp(li, kLn1W), lp(li, kLn1B), rows, C);
  tp_.gather(l.ln1 + mine, l.ln1, N, C);
  k_.matmul_forward(l.qkv, l.ln1, lp(li, kQkvW), lp(li, kQkvB), N, C, 3 * Cl);
  k_.attention_forward(l.atty, l.att, l.qkv, a.B, a.T, Cl, NHl_);
  k_.matmul_forward(partial_, l.atty, lp(li, kAttProjW), rank0 ? lp(li, kAttProjB) : nullptr, N, Cl, C);
  tp_.reduce(partial_, l.res2, N, C);
  k_.add_inplace(l.res2, x, static_cast<size_t>(rows) * C);
  // MLP: the same shape, with this rank's 4C/T hidden units.
  k_.layernorm_forward(l.ln2 + mine, l.ln2_mean, l.ln2_rstd, l.res2, lp(li, kLn2W), lp(li, kLn2B), rows, C);
  tp_.gather(l.ln2 + mine, l.ln2, N, C);
  k_.matmul_forward(l.fch, l.ln2, lp(li, kFcW), lp(li, kFcB), N, C, 4 * Cl);
  k_.gelu_forward(l.fch_gelu, l.fch, static_cast<size_t>(N) * 4 * Cl);
  k_.matmul_forward(partial_, l.fch_gelu, lp(li, kFcProjW), rank0 ? lp(li, kFcProjB) : nullptr, N, 4 * Cl, C);
  tp_.reduce(partial_, l.res3, N, C);
  k_.add_inplace(l.res3, l.res2, static_cast<size_t>(rows) * C);
}

float Gpt::forward(Activations& a, const int* tokens, const int* targets, int B, int T) {
  if (B < 1 || B > max_batch_ || T < 1 || T > cfg_.ctx)
    throw std::invalid_argument("forward: batch or length out of range");
  const int N = B * T, C = C_;
  if (tp_.sequence_parallel() && N % tp_.size())
    throw std::invalid_argument("forward: rows do not divide over the sequence-parallel ranks");
  const int rows = tp_.rows(N);
  const size_t mine = static_cast<size_t>(tp_.first_row(N)) * C;  // this rank's rows
  const bool rank0 = tp_.rank() == 0;
  a.B = B;
  a.T = T;
  k_.upload(a.tokens.data(), tokens, N * sizeof(int));
  a.have_targets = targets != nullptr;
  if (targets) k_.upload(a.targets.data(), targets, N * sizeof(int));
  const int* device_targets = targets ? a.targets.data() : nullptr;
  const WeightUses uses = weight_uses(cfg_, chunk_, true);
  auto use = uses.begin();

  if (chunk_.embedding) {
    // Each rank adds the embeddings of the tokens in its slice of the vocabulary (rank 0
    // the positions too); their sum over the ranks is the embedding (g).
    Opened open(w_, *use++);
    k_.embed_forward(partial_, a.tokens.data(), param(tensor_wte()), vocab_start_, Vl_,
                     rank0 ? param(tensor_wpe()) : nullptr, B, T, C);
    tp_.reduce(partial_, a.x, N, C);
  }
  const float* x = a.x;
  for (int li = chunk_.first_layer; li < chunk_.end_layer; ++li) {
    Layer& l = a.layers[li - chunk_.first_layer];
    Opened open(w_, *use++);
    block_forward(a, li, l, x);
    x = l.res3;
  }
  if (!chunk_.head) return 0.0f;
  // The head is tied, logits = lnf @ wte^T, each rank for its slice of the vocabulary;
  // the softmax takes the max and the sums over all slices (vocabulary-parallel loss).
  Opened open(w_, *use++);
  k_.layernorm_forward(a.lnf + mine, a.lnf_mean, a.lnf_rstd, x, param(tensor_lnf_w(cfg_)),
                       param(tensor_lnf_b(cfg_)), rows, C);
  tp_.gather(a.lnf + mine, a.lnf, N, C);
  k_.matmul_forward(a.logits, a.lnf, param(tensor_wte()), nullptr, N, C, Vl_);
  k_.softmax_max(a.maxes, a.logits, N, Vl_);
  tp_.all_reduce(a.maxes, N, strata::ReduceOp::max);
  k_.softmax_exp(a.logits, a.sums, a.maxes, device_targets, vocab_start_, N, Vl_);
  tp_.all_reduce(a.sums, targets ? 2 * N : N, strata::ReduceOp::sum);
  return k_.softmax_xent_finish(a.logits, a.losses, a.sums, a.maxes, targets != nullptr, N, Vl_);
}

void Gpt::backward(Activations& a, GradSink& sink, float loss_scale) {
  if (!a.have_targets && chunk_.head) throw std::logic_error("backward needs a forward with targets");
  a.have_targets = false;  // the probabilities are about to become dlogits
  const int B = a.B, T = a.T, N = B * T, C = C_, Cl = Cl_;
  const int rows = tp_.rows(N);
  auto g = [&](int layer, LayerTensor t) { return sink.grad(tensor_layer(layer, t)); };
  float* dres = a.dres;  // the residual stream's gradient, this rank's rows
  const WeightUses uses = weight_uses(cfg_, chunk_, false);
  auto use = uses.begin();

  if (chunk_.head) {
    Opened open(w_, *use++);
    float* dlogits = a.logits;
    k_.softmax_xent_backward(dlogits, a.targets.data(), vocab_start_, N, Vl_, loss_scale / N);
    k_.matmul_backward(partial_, sink.grad(tensor_wte()), nullptr, dlogits, a.lnf,
                       param(tensor_wte()), N, C, Vl_);
    tp_.reduce(partial_, dln_, N, C);  // f backward: every slice of the vocabulary contributes
    k_.zero(dres, static_cast<size_t>(rows) * C * sizeof(float));
    const float* last = a.output();
    k_.layernorm_backward(dres, sink.grad(tensor_lnf_w(cfg_)), sink.grad(tensor_lnf_b(cfg_)), dln_,
                          last, param(tensor_lnf_w(cfg_)), a.lnf_mean, a.lnf_rstd, rows, C);
    sink.ready_from(tensor_lnf_w(cfg_));
  }

  // dres carries the residual stream's gradient down through the blocks: each sub-block
  // adds its input gradient to it. Backward meets a block's tensors in exactly the reverse
  // of their storage order, so after each one the whole suffix from it on is final; saying
  // so at once lets its bucket's reduction start while the rest of backward runs.
  for (int li = chunk_.end_layer - 1; li >= chunk_.first_layer; --li) {
    Opened open(w_, *use++);
    const float* x = li == chunk_.first_layer ? a.x : a.layers[li - chunk_.first_layer - 1].res3;
    // With recompute the block's intermediates are computed again from its input, into the
    // shared buffer (and an output of its own: the kept one is the next block's input).
    Layer redo;
    if (recompute_) {
      carve_layer(redo, redo_base_, true);
      block_forward(a, li, redo, x);
    }
    Layer& l = recompute_ ? redo : a.layers[li - chunk_.first_layer];
    auto done = [&](LayerTensor t) { sink.ready_from(tensor_layer(li, t)); };
    // MLP: all rows of the gradient (g backward), row-parallel c_proj, GELU,
    // column-parallel c_fc, its input gradient summed over the ranks (f backward).
    const float* dout = tp_.gather(dres, dfull_, N, C);
    k_.matmul_backward(d4c_, g(li, kFcProjW), g(li, kFcProjB), dout, l.fch_gelu, lp(li, kFcProjW), N,
                       4 * Cl, C);
    done(kFcProjW);
    k_.gelu_backward(d4c_, l.fch, d4c_, static_cast<size_t>(N) * 4 * Cl);
    k_.matmul_backward(partial_, g(li, kFcW), g(li, kFcB), d4c_, l.ln2, lp(li, kFcW), N, C, 4 * Cl);
    done(kFcW);
    tp_.reduce(partial_, dln_, N, C);
    k_.layernorm_backward(dres, g(li, kLn2W), g(li, kLn2B), dln_, l.res2, lp(li, kLn2W), l.ln2_mean,
                          l.ln2_rstd, rows, C);
    done(kLn2W);
    // Attention, the same way.
    dout = tp_.gather(dres, dfull_, N, C);
    k_.matmul_backward(datty_, g(li, kAttProjW), g(li, kAttProjB), dout, l.atty, lp(li, kAttProjW),
                       N, Cl, C);
    done(kAttProjW);
    k_.attention_backward(dqkv_, datt_, datty_, l.qkv, l.att, B, T, Cl, NHl_);
    k_.matmul_backward(partial_, g(li, kQkvW), g(li, kQkvB), dqkv_, l.ln1, lp(li, kQkvW), N, C,
                       3 * Cl);
    done(kQkvW);
    tp_.reduce(partial_, dln_, N, C);
    k_.layernorm_backward(dres, g(li, kLn1W), g(li, kLn1B), dln_, x, lp(li, kLn1W), l.ln1_mean,
                          l.ln1_rstd, rows, C);
    done(kLn1W);
  }
  if (chunk_.embedding) {
    const float* dout = tp_.gather(dres, dfull_, N, C);  // g backward
    k_.embed_backward(sink.grad(tensor_wte()), sink.grad(tensor_wpe()), dout, a.tokens.data(),
                      vocab_start_, Vl_, B, T, C);
    sink.ready_from(0);
  }
}

}  // namespace strata::train
