// The numerical building blocks of the model and the optimizer, as a table of functions.
// The model only calls through this table, so a CUDA (or other) backend can be added by
// providing another table whose pointers refer to device memory; nothing else changes.
//
// Conventions: row-major; N = rows (batch * time); a weight matrix is [out, in] as in
// nn.Linear. Parameter gradients (dw, db) accumulate (+=) so that a tensor used twice
// (the tied embedding) sums both uses; activation gradients are overwritten unless the
// comment says "+=".
#pragma once

#include <cstddef>

namespace strata::train {

struct Kernels {
  const char* name;

  // out[N,OC] = inp[N,C] @ w[OC,C]^T + b   (b may be null)
  void (*matmul_forward)(float* out, const float* inp, const float* w, const float* b, int N, int C,
                         int OC);
  // dinp = dout @ w; dw += dout^T @ inp; db += column sums of dout (db may be null)
  void (*matmul_backward)(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, int N, int C, int OC);

  // out = (inp - mean) * rstd * w + b per row; mean and rstd are kept for backward.
  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp, const float* w,
                            const float* b, int N, int C);
  // dinp += ..., dw += ..., db += ...
  void (*layernorm_backward)(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                             const float* w, const float* mean, const float* rstd, int N, int C);

  // qkv[B,T,3C] (q, k, v side by side, heads contiguous inside each) -> out[B,T,C];
  // att[B,NH,T,T] keeps the causal softmax probabilities for backward.
  void (*attention_forward)(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
  // dqkv from dout; scratch holds T*T floats.
  void (*attention_backward)(float* dqkv, float* scratch, const float* dout, const float* qkv,
                             const float* att, int B, int T, int C, int NH);

  // GELU, tanh approximation (GPT-2's).
  void (*gelu_forward)(float* out, const float* inp, size_t n);
  // dinp = gelu'(inp) * dout (dinp may alias dout)
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, size_t n);

  void (*add_inplace)(float* y, const float* x, size_t n);  // y += x

  // out[b,t] = wte[tokens[b,t] - vocab_start] + wpe[t]. wte holds vocabulary rows
  // [vocab_start, vocab_start + vocab_rows) (a tensor-parallel piece); a token outside
  // them adds nothing. wpe may be null (not added).
  void (*embed_forward)(float* out, const int* tokens, const float* wte, int vocab_start,
                        int vocab_rows, const float* wpe, int B, int T, int C);
  // dwte[tokens - vocab_start] += dout for tokens in the piece, dwpe[t] += dout (dwpe may
  // be null)
  void (*embed_backward)(float* dwte, float* dwpe, const float* dout, const int* tokens,
                         int vocab_start, int vocab_rows, int B, int T, int C);

  // Softmax cross-entropy in three passes over logits[N,V], so that the vocabulary can be
  // cut over tensor-parallel ranks (V columns each, starting at vocab_start) with a max
  // and a sum over the ranks between the passes; on one rank they run back to back.
  // maxes[n] = the largest logit of row n.
  void (*softmax_max)(float* maxes, const float* logits, int N, int V);
  // In place: logits become exp(logit - maxes[n]); sums[n] = their row sum and, with
  // targets, sums[N + n] = the logit of targets[n] if this piece holds it, else 0.
  void (*softmax_exp)(float* logits, float* sums, const float* maxes, const int* targets,
                      int vocab_start, int N, int V);
  // In place: probs = exp / sums[n]. With targets, losses[n] = log(sums[n]) + maxes[n] -
  // sums[N + n] (log-sum-exp: exact for tiny probabilities) and the mean is returned;
  // without, returns 0.
  float (*softmax_xent_finish)(float* probs, float* losses, const float* sums, const float* maxes,
                               bool targets, int N, int V);
  // In place: probs become dlogits = (probs - onehot(targets - vocab_start)) * scale.
  void (*softmax_xent_backward)(float* probs, const int* targets, int vocab_start, int N, int V,
                                float scale);

  // Sum of squares, accumulated in double so the global norm does not depend on how the
  // buffer is split over ranks beyond rounding of the partial sums.
  double (*sum_squares)(const float* x, size_t n);
  // One AdamW step on n elements. grad_scale multiplies the gradient first (clipping);
  // bc1/bc2 are the bias corrections 1 - beta^t.
  void (*adamw)(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                float beta2, float eps, float weight_decay, float bc1, float bc2, float grad_scale);
};

// The host implementation: OpenBLAS sgemm for matrix products, plain loops elsewhere.
const Kernels& cpu_kernels();
// Threads OpenBLAS may use (the ranks of a job share the machine's cores).
void set_blas_threads(int n);

}  // namespace strata::train
