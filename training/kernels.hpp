// What the model and the optimizer do to tensors, on one device: the memory the tensors
// live in (allocate, move to and from the host, zero, copy) and the numerical kernels
// over it. The model only calls through this interface, so it runs unchanged on the host
// (kernels_cpu.cpp: OpenBLAS and loops) and on a device backend (training/device/: the
// same functors on the emulated backend and on CUDA), where every pointer is device memory
// and every call is queued on the device's training stream.
//
// Conventions: row-major; N = rows (batch * time); a weight matrix is [out, in] as in
// nn.Linear. Parameter gradients (dw, db) accumulate (+=) so that a tensor used twice
// (the tied embedding) sums both uses; activation gradients are overwritten unless the
// comment says "+=".
#pragma once

#include <cstddef>
#include <cstdint>
#include <strata/device.hpp>

namespace strata::train {

class Kernels {
 public:
  virtual ~Kernels() = default;
  // "host", "emulated", "cuda".
  virtual const char* name() const = 0;

  // Memory. alloc gives `bytes` of zeroed memory of this device (0 bytes: nullptr).
  // upload and copy are ordered with the kernels (the host source may be reused at
  // once); download returns when the bytes are in `dst` (all queued work done).
  virtual void* alloc(size_t bytes) const = 0;
  virtual void free(void* p) const = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) const = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) const = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;
  virtual void zero(void* dst, size_t bytes) const = 0;
  // Waits for everything queued (a no-op on the host).
  virtual void synchronize() const = 0;
  // The stream every call is queued on (nullptr on the host).
  virtual strata::device::Stream stream() const = 0;

  // out[N,OC] = inp[N,C] @ w[OC,C]^T + b   (b may be null)
  virtual void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                              int OC) const = 0;
  // dinp = dout @ w; dw += dout^T @ inp; db += column sums of dout (db may be null)
  virtual void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                               const float* w, int N, int C, int OC) const = 0;

  // out = (inp - mean) * rstd * w + b per row; mean and rstd are kept for backward.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                 const float* b, int N, int C) const = 0;
  // dinp += ..., dw += ..., db += ...
  virtual void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                  const float* w, const float* mean, const float* rstd, int N, int C) const = 0;

  // qkv[B,T,3C] (q, k, v side by side, heads contiguous inside each) -> out[B,T,C];
  // att[B,NH,T,T] keeps the causal softmax probabilities for backward.
  virtual void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) const = 0;
  // dqkv from dout; scratch holds attention_scratch(T, NH) floats.
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                  const float* att, int B, int T, int C, int NH) const = 0;
  virtual size_t attention_scratch(int T, int NH) const = 0;

  // GELU, tanh approximation (GPT-2's).
  virtual void gelu_forward(float* out, const float* inp, size_t n) const = 0;
  // dinp = gelu'(inp) * dout (dinp may alias dout)
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) const = 0;

  virtual void add_inplace(float* y, const float* x, size_t n) const = 0;  // y += x

  // The gradients' bf16 copy for the reduction (--grad-dtype bf16): out = in rounded to
  // the nearest bfloat16 (ties to even: ground/half.hpp, as the library's reductions
  // round); and back, times `scale` (the average's 1/ranks).
  virtual void to_bf16(uint16_t* out, const float* in, size_t n) const = 0;
  virtual void from_bf16(float* out, const uint16_t* in, size_t n, float scale) const = 0;

  // out[b,t] = wte[tokens[b,t] - vocab_start] + wpe[t]. wte holds vocabulary rows
  // [vocab_start, vocab_start + vocab_rows) (a tensor-parallel piece); a token outside
  // them adds nothing. wpe may be null (not added). tokens are in this device's memory.
  virtual void embed_forward(float* out, const int* tokens, const float* wte, int vocab_start, int vocab_rows,
                             const float* wpe, int B, int T, int C) const = 0;
  // dwte[tokens - vocab_start] += dout for tokens in the piece, dwpe[t] += dout (dwpe may
  // be null)
  virtual void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start,
                              int vocab_rows, int B, int T, int C) const = 0;

  // Softmax cross-entropy in three passes over logits[N,V], so that the vocabulary can be
  // cut over tensor-parallel ranks (V columns each, starting at vocab_start) with a max
  // and a sum over the ranks between the passes; on one rank they run back to back.
  // maxes[n] = the largest logit of row n.
  virtual void softmax_max(float* maxes, const float* logits, int N, int V) const = 0;
  // In place: logits become exp(logit - maxes[n]); sums[n] = their row sum and, with
  // targets, sums[N + n] = the logit of targets[n] if this piece holds it, else 0.
  virtual void softmax_exp(float* logits, float* sums, const float* maxes, const int* targets, int vocab_start,
                           int N, int V) const = 0;
  // In place: probs = exp / sums[n]. With targets, losses[n] = log(sums[n]) + maxes[n] -
  // sums[N + n] (log-sum-exp: exact for tiny probabilities) and the mean is returned;
  // without, returns 0.
  virtual float softmax_xent_finish(float* probs, float* losses, const float* sums, const float* maxes,
                                    bool targets, int N, int V) const = 0;
  // In place: probs become dlogits = (probs - onehot(targets - vocab_start)) * scale.
  virtual void softmax_xent_backward(float* probs, const int* targets, int vocab_start, int N, int V,
                                     float scale) const = 0;

  // Sum of squares, accumulated in double so the global norm does not depend on how the
  // buffer is split over ranks beyond rounding of the partial sums.
  virtual double sum_squares(const float* x, size_t n) const = 0;
  // One AdamW step on n elements. grad_scale multiplies the gradient first (clipping);
  // bc1/bc2 are the bias corrections 1 - beta^t.
  virtual void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, float bc1, float bc2, float grad_scale) const = 0;
};

// The host implementation: OpenBLAS sgemm for matrix products, plain loops elsewhere.
const Kernels& cpu_kernels();
// Threads OpenBLAS may use (the ranks of a job share the machine's cores).
void set_blas_threads(int n);

}  // namespace strata::train
