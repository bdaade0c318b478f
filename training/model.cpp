#include "model.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "rng.hpp"

namespace strata::train {

void init_params(const ParamLayout& layout, float* params, uint64_t seed) {
  const ModelConfig& c = layout.config();
  std::memset(params, 0, layout.padded_size() * sizeof(float));
  const float std_proj = 0.02f / std::sqrt(2.0f * c.layers);
  for (int id = 0; id < tensor_count(c); ++id) {
    const TensorInfo& t = layout.tensor(id);
    float* p = params + t.offset;
    if (!t.decay && t.name.ends_with(".weight")) {  // LayerNorm gain
      for (size_t i = 0; i < t.size; ++i) p[i] = 1.0f;
    } else if (t.decay) {  // matrices and embeddings
      bool proj = t.name.ends_with("c_proj.weight");
      float sd = proj ? std_proj : 0.02f;
      Rng rng(stream_seed(seed, 1000 + id));
      for (size_t i = 0; i < t.size; ++i) p[i] = sd * rng.normal();
    }  // biases stay zero
  }
}

Gpt::Gpt(const ParamLayout& layout, const float* params, const Kernels& k, int max_batch)
    : layout_(layout), params_(params), k_(k), cfg_(layout.config()), max_batch_(max_batch) {
  const size_t N = static_cast<size_t>(max_batch) * cfg_.ctx, C = cfg_.dim, V = cfg_.vocab;
  const size_t att = static_cast<size_t>(max_batch) * cfg_.heads * cfg_.ctx * cfg_.ctx;
  const size_t per_layer = N * C * 5 + N * 3 * C + N * 4 * C * 2 + N * 4 + att;
  const size_t total = per_layer * cfg_.layers + N * C * 2 + N * 3 + N * V +     // forward
                       N * C * 2 + N * 4 * C + N * 3 * C + cfg_.ctx * cfg_.ctx;  // scratch
  acts_.assign(total, 0.0f);
  float* p = acts_.data();
  auto take = [&](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  layers_.resize(cfg_.layers);
  for (auto& l : layers_) {
    l.ln1 = take(N * C);
    l.ln1_mean = take(N);
    l.ln1_rstd = take(N);
    l.qkv = take(N * 3 * C);
    l.att = take(att);
    l.atty = take(N * C);
    l.res2 = take(N * C);
    l.ln2 = take(N * C);
    l.ln2_mean = take(N);
    l.ln2_rstd = take(N);
    l.fch = take(N * 4 * C);
    l.fch_gelu = take(N * 4 * C);
    l.res3 = take(N * C);
  }
  encoded_ = take(N * C);
  lnf_ = take(N * C);
  lnf_mean_ = take(N);
  lnf_rstd_ = take(N);
  probs_ = take(N * V);
  losses_ = take(N);
  dres_ = take(N * C);
  dc_ = take(N * C);
  d4c_ = take(N * 4 * C);
  dqkv_ = take(N * 3 * C);
  datt_ = take(static_cast<size_t>(cfg_.ctx) * cfg_.ctx);
  if (p != acts_.data() + total) throw std::logic_error("activation layout mismatch");
}

float Gpt::forward(const int* tokens, const int* targets, int B, int T) {
  if (B < 1 || B > max_batch_ || T < 1 || T > cfg_.ctx)
    throw std::invalid_argument("forward: batch or length out of range");
  const int N = B * T, C = cfg_.dim, V = cfg_.vocab, NH = cfg_.heads;
  B_ = B;
  T_ = T;
  tokens_.assign(tokens, tokens + N);
  have_targets_ = targets != nullptr;
  if (targets) targets_.assign(targets, targets + N);

  k_.embed_forward(encoded_, tokens, param(tensor_wte()), param(tensor_wpe()), B, T, C);
  const float* x = encoded_;
  for (int li = 0; li < cfg_.layers; ++li) {
    Layer& l = layers_[li];
    k_.layernorm_forward(l.ln1, l.ln1_mean, l.ln1_rstd, x, lp(li, kLn1W), lp(li, kLn1B), N, C);
    k_.matmul_forward(l.qkv, l.ln1, lp(li, kQkvW), lp(li, kQkvB), N, C, 3 * C);
    k_.attention_forward(l.atty, l.att, l.qkv, B, T, C, NH);
    k_.matmul_forward(l.res2, l.atty, lp(li, kAttProjW), lp(li, kAttProjB), N, C, C);
    k_.add_inplace(l.res2, x, static_cast<size_t>(N) * C);
    k_.layernorm_forward(l.ln2, l.ln2_mean, l.ln2_rstd, l.res2, lp(li, kLn2W), lp(li, kLn2B), N, C);
    k_.matmul_forward(l.fch, l.ln2, lp(li, kFcW), lp(li, kFcB), N, C, 4 * C);
    k_.gelu_forward(l.fch_gelu, l.fch, static_cast<size_t>(N) * 4 * C);
    k_.matmul_forward(l.res3, l.fch_gelu, lp(li, kFcProjW), lp(li, kFcProjB), N, 4 * C, C);
    k_.add_inplace(l.res3, l.res2, static_cast<size_t>(N) * C);
    x = l.res3;
  }
  k_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, param(tensor_lnf_w(cfg_)),
                       param(tensor_lnf_b(cfg_)), N, C);
  // The head is tied: logits = lnf @ wte^T.
  k_.matmul_forward(probs_, lnf_, param(tensor_wte()), nullptr, N, C, V);
  return k_.softmax_xent_forward(probs_, losses_, targets, N, V);
}

void Gpt::backward(GradSink& sink) {
  if (!have_targets_) throw std::logic_error("backward needs a forward with targets");
  have_targets_ = false;  // probs are about to become dlogits
  const int B = B_, T = T_, N = B * T, C = cfg_.dim, V = cfg_.vocab, NH = cfg_.heads;
  const size_t NC = static_cast<size_t>(N) * C;
  auto g = [&](int layer, LayerTensor t) { return sink.grad(tensor_layer(layer, t)); };

  float* dlogits = probs_;
  k_.softmax_xent_backward(dlogits, targets_.data(), N, V, 1.0f / N);
  k_.matmul_backward(dc_, sink.grad(tensor_wte()), nullptr, dlogits, lnf_, param(tensor_wte()), N,
                     C, V);
  std::memset(dres_, 0, NC * sizeof(float));
  const float* last = cfg_.layers ? layers_.back().res3 : encoded_;
  k_.layernorm_backward(dres_, sink.grad(tensor_lnf_w(cfg_)), sink.grad(tensor_lnf_b(cfg_)), dc_,
                        last, param(tensor_lnf_w(cfg_)), lnf_mean_, lnf_rstd_, N, C);
  sink.ready_from(tensor_lnf_w(cfg_));

  // dres_ carries the residual stream's gradient down through the blocks: each sub-block
  // adds its input gradient to it. Backward meets a block's tensors in exactly the reverse
  // of their storage order, so after each one the whole suffix from it on is final; saying
  // so at once lets its bucket's reduction start while the rest of backward runs.
  for (int li = cfg_.layers - 1; li >= 0; --li) {
    Layer& l = layers_[li];
    const float* x = li == 0 ? encoded_ : layers_[li - 1].res3;
    auto done = [&](LayerTensor t) { sink.ready_from(tensor_layer(li, t)); };
    k_.matmul_backward(d4c_, g(li, kFcProjW), g(li, kFcProjB), dres_, l.fch_gelu, lp(li, kFcProjW),
                       N, 4 * C, C);
    done(kFcProjW);
    k_.gelu_backward(d4c_, l.fch, d4c_, static_cast<size_t>(N) * 4 * C);
    k_.matmul_backward(dc_, g(li, kFcW), g(li, kFcB), d4c_, l.ln2, lp(li, kFcW), N, C, 4 * C);
    done(kFcW);
    k_.layernorm_backward(dres_, g(li, kLn2W), g(li, kLn2B), dc_, l.res2, lp(li, kLn2W), l.ln2_mean,
                          l.ln2_rstd, N, C);
    done(kLn2W);
    k_.matmul_backward(dc_, g(li, kAttProjW), g(li, kAttProjB), dres_, l.atty, lp(li, kAttProjW), N,
                       C, C);
    done(kAttProjW);
    k_.attention_backward(dqkv_, datt_, dc_, l.qkv, l.att, B, T, C, NH);
    k_.matmul_backward(dc_, g(li, kQkvW), g(li, kQkvB), dqkv_, l.ln1, lp(li, kQkvW), N, C, 3 * C);
    done(kQkvW);
    k_.layernorm_backward(dres_, g(li, kLn1W), g(li, kLn1B), dc_, x, lp(li, kLn1W), l.ln1_mean,
                          l.ln1_rstd, N, C);
    done(kLn1W);
  }
  k_.embed_backward(sink.grad(tensor_wte()), sink.grad(tensor_wpe()), dres_, tokens_.data(), B, T,
                    C);
  sink.ready_from(0);
}

}  // namespace strata::train
