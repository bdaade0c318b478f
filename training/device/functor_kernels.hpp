// The kernel half of a device backend's Kernels, written once: each kernel as the
// functors of functors.hpp and the matrix products it needs, run by a Launch policy,
// which is the only part that differs between backends:
//
//   rows(n, f)       f(row, lanes) for every row in [0, n)
//   elements(n, f)   f(i) for every i in [0, n)
//   gemm(g)          the matrix products of one Gemm (cblas_sgemm's row-major meaning)
//   reduction_rows(n)  how many partial sums a reduction of n elements is cut into
//
// EmulatedLaunch (emulated_kernels.cpp) runs them as loops with OpenBLAS in stream tasks;
// CudaLaunch (training/cuda) as kernels with a block per row and cuBLAS. Every launch is
// queued on the device's training stream; only the two kernels that return a number to
// the host (the mean loss, the sum of squares) wait for it.
//
// C++17: nvcc compiles this too.
#pragma once

#include <cmath>
#include <cstddef>

#include "device/buffer.hpp"
#include "device/functors.hpp"
#include "device/gemm.hpp"
#include "device/on_device.hpp"

namespace strata::train {

namespace dk = device_kernels;

template <typename Launch>
class FunctorKernels final : public OnDevice {
 public:
  // launch_args: what the Launch takes besides the device (CUDA: bf16 products or not).
  template <typename... LaunchArgs>
  FunctorKernels(strata::device::Backend& backend, const char* name, LaunchArgs... launch_args)
      : OnDevice(backend, name), launch_(*this, launch_args...), partial_(*this, kMaxPartials + 1), loss_(*this, 1) {}
  ~FunctorKernels() override { synchronize(); }

  void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                      int OC) const override {
    if (b) launch_.rows(N, dk::BiasRows{out, b, OC});
    launch_.gemm(Gemm{false, true, N, OC, C, 1.0f, inp, C, 0, w, C, 0, b ? 1.0f : 0.0f, out, OC, 0, 1});
  }
  void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                       int N, int C, int OC) const override {
    launch_.gemm(Gemm{false, false, N, C, OC, 1.0f, dout, OC, 0, w, C, 0, 0.0f, dinp, C, 0, 1});
    launch_.gemm(Gemm{true, false, OC, C, N, 1.0f, dout, OC, 0, inp, C, 0, 1.0f, dw, C, 0, 1});
    if (db) launch_.rows(OC, dk::ColumnSums{db, dout, N, OC});
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                         int N, int C) const override {
    launch_.rows(N, dk::LayerNormForward{out, mean, rstd, inp, w, b, C});
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                          const float* mean, const float* rstd, int N, int C) const override {
    launch_.rows(N, dk::LayerNormBackward{dinp, dout, inp, w, mean, rstd, C});
    launch_.rows(C, dk::LayerNormBackwardParams{dw, db, dout, inp, mean, rstd, N, C});
  }

  // Per sequence b, its heads as one batch of products: q, k and v of head h are the
  // columns [h*hs, (h+1)*hs) of their third of qkv (row stride 3C), the scores of (b, h)
  // are att's T x T block b*NH + h.
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) const override {
    const int hs = C / NH, ld = 3 * C;
    const size_t tt = static_cast<size_t>(T) * T, seq = static_cast<size_t>(T) * ld;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    for (int b = 0; b < B; ++b) {
      const float* q = qkv + b * seq;
      launch_.gemm(Gemm{false, true, T, T, hs, scale, q, ld, size_t(hs), q + C, ld, size_t(hs), 0.0f,
                        att + b * NH * tt, T, tt, NH});
    }
    launch_.rows(B * NH * T, dk::CausalSoftmax{att, T});
    for (int b = 0; b < B; ++b)
      launch_.gemm(Gemm{false, false, T, hs, T, 1.0f, att + b * NH * tt, T, tt, qkv + b * seq + 2 * C, ld,
                        size_t(hs), 0.0f, out + static_cast<size_t>(b) * T * C, C, size_t(hs), NH});
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                          int B, int T, int C, int NH) const override {
    const int hs = C / NH, ld = 3 * C;
    const size_t tt = static_cast<size_t>(T) * T, seq = static_cast<size_t>(T) * ld, h = hs;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    for (int b = 0; b < B; ++b) {
      const float *q = qkv + b * seq, *k = q + C, *v = q + 2 * C, *p = att + b * NH * tt;
      float *dq = dqkv + b * seq, *dk_ = dq + C, *dv = dq + 2 * C, *dp = scratch;
      const float* dy = dout + static_cast<size_t>(b) * T * C;
      // dP = dY V^T, dV = P^T dY, dS = softmax backward, dQ = scale dS K, dK = scale dS^T Q
      launch_.gemm(Gemm{false, true, T, T, hs, 1.0f, dy, C, h, v, ld, h, 0.0f, dp, T, tt, NH});
      launch_.gemm(Gemm{true, false, T, hs, T, 1.0f, p, T, tt, dy, C, h, 0.0f, dv, ld, h, NH});
      launch_.rows(NH * T, dk::CausalSoftmaxBackward{dp, p, T});
      launch_.gemm(Gemm{false, false, T, hs, T, scale, dp, T, tt, k, ld, h, 0.0f, dq, ld, h, NH});
      launch_.gemm(Gemm{true, false, T, hs, T, scale, dp, T, tt, q, ld, h, 0.0f, dk_, ld, h, NH});
    }
  }
  // All heads of a sequence at once.
  size_t attention_scratch(int T, int NH) const override { return static_cast<size_t>(NH) * T * T; }

  void gelu_forward(float* out, const float* inp, size_t n) const override {
    launch_.elements(n, dk::GeluForward{out, inp});
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) const override {
    launch_.elements(n, dk::GeluBackward{dinp, inp, dout});
  }
  void add_inplace(float* y, const float* x, size_t n) const override { launch_.elements(n, dk::AddInplace{y, x}); }
  void to_bf16(uint16_t* out, const float* in, size_t n) const override { launch_.elements(n, dk::ToBf16{out, in}); }
  void from_bf16(float* out, const uint16_t* in, size_t n, float scale) const override {
    launch_.elements(n, dk::FromBf16{out, in, scale});
  }

  void embed_forward(float* out, const int* tokens, const float* wte, int vocab_start, int vocab_rows,
                     const float* wpe, int B, int T, int C) const override {
    launch_.rows(B * T, dk::EmbedForward{out, tokens, wte, wpe, vocab_start, vocab_rows, T, C});
  }
  void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start,
                      int vocab_rows, int B, int T, int C) const override {
    launch_.rows(vocab_rows, dk::EmbedBackwardWte{dwte, dout, tokens, vocab_start, B * T, C});
    if (dwpe) launch_.rows(T, dk::EmbedBackwardWpe{dwpe, dout, B, T, C});
  }

  void softmax_max(float* maxes, const float* logits, int N, int V) const override {
    launch_.rows(N, dk::SoftmaxMax{maxes, logits, V});
  }
  void softmax_exp(float* logits, float* sums, const float* maxes, const int* targets, int vocab_start, int N,
                   int V) const override {
    launch_.rows(N, dk::SoftmaxExp{logits, sums, maxes, targets, vocab_start, N, V});
  }
  float softmax_xent_finish(float* probs, float* losses, const float* sums, const float* maxes, bool targets,
                            int N, int V) const override {
    launch_.rows(N, dk::SoftmaxXentFinish{probs, losses, sums, maxes, targets, N, V});
    if (!targets) return 0.0f;
    launch_.rows(1, dk::MeanLoss{loss_.data(), losses, N});
    return loss_.to_host()[0];
  }
  void softmax_xent_backward(float* probs, const int* targets, int vocab_start, int N, int V,
                             float scale) const override {
    launch_.rows(N, dk::SoftmaxXentBackward{probs, targets, vocab_start, V, scale});
  }

  double sum_squares(const float* x, size_t n) const override {
    if (n == 0) return 0.0;
    size_t rows = launch_.reduction_rows(n);
    rows = rows < 1 ? 1 : rows > kMaxPartials ? kMaxPartials : rows;
    const size_t chunk = (n + rows - 1) / rows;
    rows = (n + chunk - 1) / chunk;
    double* partial = partial_.data();
    launch_.rows(static_cast<int>(rows), dk::SumSquaresRows{partial, x, n, chunk});
    launch_.rows(1, dk::SumRows{partial + kMaxPartials, partial, static_cast<int>(rows)});
    return partial_.to_host(kMaxPartials, 1)[0];
  }
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2, float eps,
             float weight_decay, float bc1, float bc2, float grad_scale) const override {
    launch_.elements(n, dk::AdamW{p, g, m, v, lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale});
  }

 private:
  static constexpr size_t kMaxPartials = 1024;
  Launch launch_;
  mutable Buffer<double> partial_;  // the sums of squares' partial sums, then their total
  mutable Buffer<float> loss_;      // the mean loss
};

}  // namespace strata::train
