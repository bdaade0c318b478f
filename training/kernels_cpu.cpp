// Host kernels. Matrix products go to OpenBLAS; the rest are single loops, which is what a
// model this size needs (the matrix products dominate).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "device/math.hpp"
#include "ground/half.hpp"
#include "kernels.hpp"

namespace strata::train {
namespace {

void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                    int OC) {
  if (b) {
    for (int n = 0; n < N; ++n)
      std::memcpy(out + static_cast<size_t>(n) * OC, b, OC * sizeof(float));
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C,
              b ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp,
              C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw,
              C);
  if (db) {
    for (int n = 0; n < N; ++n) {
      const float* row = dout + static_cast<size_t>(n) * OC;
      for (int o = 0; o < OC; ++o) db[o] += row[o];
    }
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* y = out + static_cast<size_t>(n) * C;
    float m = 0;
    for (int i = 0; i < C; ++i) m += x[i];
    m /= C;
    float var = 0;
    for (int i = 0; i < C; ++i) var += (x[i] - m) * (x[i] - m);
    var /= C;
    float s = 1.0f / std::sqrt(var + math::kLayerNormEps);
    for (int i = 0; i < C; ++i) y[i] = (x[i] - m) * s * w[i] + b[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* dy = dout + static_cast<size_t>(n) * C;
    const float* x = inp + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    float m = mean[n], s = rstd[n];
    // The normalised input's gradient minus its projections on 1 and on xhat.
    float dnorm_mean = 0, dnorm_xhat_mean = 0;
    for (int i = 0; i < C; ++i) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * w[i];
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * xhat;
    }
    dnorm_mean /= C;
    dnorm_xhat_mean /= C;
    for (int i = 0; i < C; ++i) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * w[i];
      db[i] += dy[i];
      dw[i] += dy[i] * xhat;
      dx[i] += s * (dnorm - dnorm_mean - xhat * dnorm_xhat_mean);
    }
  }
}

// Per (batch, head): S = QK^T/sqrt(hs), causal softmax, Y = PV. Q, K, V are strided views
// into qkv (row stride 3C), so no copies. The masked upper triangle is computed and then
// discarded; at these sizes one sgemm beats a triangular loop.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + static_cast<size_t>(b) * T * ld + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, ld, k, ld, 0.0f, p,
                  T);
      for (int t = 0; t < T; ++t) {
        float* row = p + static_cast<size_t>(t) * T;
        float mx = row[0];
        for (int j = 1; j <= t; ++j) mx = std::max(mx, row[j]);
        float sum = 0;
        for (int j = 0; j <= t; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
      }
      float* y = out + static_cast<size_t>(b) * T * C + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, ld, 0.0f, y,
                  C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      size_t base = static_cast<size_t>(b) * T * ld + h * hs;
      const float* q = qkv + base;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + base;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
      const float* dy = dout + static_cast<size_t>(b) * T * C + h * hs;
      float* dp = scratch;
      // dP = dY V^T, dV = P^T dY
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, ld, 0.0f, dp,
                  T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, dy, C, 0.0f, dv,
                  ld);
      // Softmax backward in place: dS = P * (dP - rowsum(P * dP)); masked entries have P = 0.
      for (int t = 0; t < T; ++t) {
        const float* pr = p + static_cast<size_t>(t) * T;
        float* dr = dp + static_cast<size_t>(t) * T;
        float dot = 0;
        for (int j = 0; j <= t; ++j) dot += pr[j] * dr[j];
        for (int j = 0; j <= t; ++j) dr[j] = pr[j] * (dr[j] - dot);
        for (int j = t + 1; j < T; ++j) dr[j] = 0.0f;
      }
      // dQ = scale dS K, dK = scale dS^T Q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, ld, 0.0f,
                  dq, ld);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, ld, 0.0f, dk,
                  ld);
    }
  }
}

// target_clones: an AVX2 build of the loop next to the baseline one, picked at load time.
__attribute__((target_clones("avx2", "default"))) void gelu_forward(float* out, const float* inp,
                                                                    size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = math::gelu(inp[i]);
  }
}

__attribute__((target_clones("avx2", "default"))) void gelu_backward(float* dinp, const float* inp,
                                                                     const float* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dinp[i] = math::gelu_grad(inp[i]) * dout[i];
  }
}

void add_inplace(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void embed_forward(float* out, const int* tokens, const float* wte, int vocab_start, int vocab_rows,
                   const float* wpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* o = out + (static_cast<size_t>(b) * T + t) * C;
      const int row = tokens[b * T + t] - vocab_start;
      const float* e = row >= 0 && row < vocab_rows ? wte + static_cast<size_t>(row) * C : nullptr;
      const float* p = wpe ? wpe + static_cast<size_t>(t) * C : nullptr;
      for (int i = 0; i < C; ++i) o[i] = (e ? e[i] : 0.0f) + (p ? p[i] : 0.0f);
    }
}

void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start,
                    int vocab_rows, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
      const int row = tokens[b * T + t] - vocab_start;
      if (row >= 0 && row < vocab_rows) {
        float* e = dwte + static_cast<size_t>(row) * C;
        for (int i = 0; i < C; ++i) e[i] += d[i];
      }
      if (dwpe) {
        float* p = dwpe + static_cast<size_t>(t) * C;
        for (int i = 0; i < C; ++i) p[i] += d[i];
      }
    }
}

void softmax_max(float* maxes, const float* logits, int N, int V) {
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * V;
    float mx = row[0];
    for (int i = 1; i < V; ++i) mx = std::max(mx, row[i]);
    maxes[n] = mx;
  }
}

void softmax_exp(float* logits, float* sums, const float* maxes, const int* targets, int vocab_start,
                 int N, int V) {
  for (int n = 0; n < N; ++n) {
    float* row = logits + static_cast<size_t>(n) * V;
    if (targets) {
      const int col = targets[n] - vocab_start;
      sums[N + n] = col >= 0 && col < V ? row[col] : 0.0f;
    }
    const float mx = maxes[n];
    float sum = 0;
    for (int i = 0; i < V; ++i) {
      row[i] = std::exp(row[i] - mx);
      sum += row[i];
    }
    sums[n] = sum;
  }
}

float softmax_xent_finish(float* probs, float* losses, const float* sums, const float* maxes,
                          bool targets, int N, int V) {
  double total = 0;
  for (int n = 0; n < N; ++n) {
    float* row = probs + static_cast<size_t>(n) * V;
    const float inv = 1.0f / sums[n];
    for (int i = 0; i < V; ++i) row[i] *= inv;
    if (targets) {
      losses[n] = std::log(sums[n]) + maxes[n] - sums[N + n];
      total += losses[n];
    }
  }
  return targets ? static_cast<float>(total / N) : 0.0f;
}

void softmax_xent_backward(float* probs, const int* targets, int vocab_start, int N, int V,
                           float scale) {
  for (int n = 0; n < N; ++n) {
    float* row = probs + static_cast<size_t>(n) * V;
    const int col = targets[n] - vocab_start;
    if (col >= 0 && col < V) row[col] -= 1.0f;
    for (int i = 0; i < V; ++i) row[i] *= scale;
  }
}

double sum_squares(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, float bc1, float bc2, float grad_scale) {
  for (size_t i = 0; i < n; ++i) {
    float grad = g[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * grad;
    v[i] = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    float mhat = m[i] / bc1, vhat = v[i] / bc2;
    // Decoupled decay (as torch.optim.AdamW): shrink the weight, then take the Adam step.
    p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p[i]);
  }
}

// Host memory: plain allocations, every copy at once.
class CpuKernels final : public Kernels {
 public:
  const char* name() const override { return "host"; }
  void* alloc(size_t bytes) const override {
    if (bytes == 0) return nullptr;
    void* p = std::calloc(1, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p) const override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) const override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) const override { copy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const override {
    if (bytes) std::memmove(dst, src, bytes);
  }
  void zero(void* dst, size_t bytes) const override {
    if (bytes) std::memset(dst, 0, bytes);
  }
  void synchronize() const override {}
  strata::device::Stream stream() const override { return nullptr; }

  void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                      int OC) const override {
    train::matmul_forward(out, inp, w, b, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                       int N, int C, int OC) const override {
    train::matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                         int N, int C) const override {
    train::layernorm_forward(out, mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                          const float* mean, const float* rstd, int N, int C) const override {
    train::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) const override {
    train::attention_forward(out, att, qkv, B, T, C, NH);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                          int B, int T, int C, int NH) const override {
    train::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  }
  // One head's T x T at a time.
  size_t attention_scratch(int T, int) const override { return static_cast<size_t>(T) * T; }
  void gelu_forward(float* out, const float* inp, size_t n) const override { train::gelu_forward(out, inp, n); }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) const override {
    train::gelu_backward(dinp, inp, dout, n);
  }
  void add_inplace(float* y, const float* x, size_t n) const override { train::add_inplace(y, x, n); }
  void to_bf16(uint16_t* out, const float* in, size_t n) const override {
    for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
  }
  void from_bf16(float* out, const uint16_t* in, size_t n, float scale) const override {
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]) * scale;
  }
  void embed_forward(float* out, const int* tokens, const float* wte, int vocab_start, int vocab_rows,
                     const float* wpe, int B, int T, int C) const override {
    train::embed_forward(out, tokens, wte, vocab_start, vocab_rows, wpe, B, T, C);
  }
  void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start,
                      int vocab_rows, int B, int T, int C) const override {
    train::embed_backward(dwte, dwpe, dout, tokens, vocab_start, vocab_rows, B, T, C);
  }
  void softmax_max(float* maxes, const float* logits, int N, int V) const override {
    train::softmax_max(maxes, logits, N, V);
  }
  void softmax_exp(float* logits, float* sums, const float* maxes, const int* targets, int vocab_start, int N,
                   int V) const override {
    train::softmax_exp(logits, sums, maxes, targets, vocab_start, N, V);
  }
  float softmax_xent_finish(float* probs, float* losses, const float* sums, const float* maxes, bool targets,
                            int N, int V) const override {
    return train::softmax_xent_finish(probs, losses, sums, maxes, targets, N, V);
  }
  void softmax_xent_backward(float* probs, const int* targets, int vocab_start, int N, int V,
                             float scale) const override {
    train::softmax_xent_backward(probs, targets, vocab_start, N, V, scale);
  }
  double sum_squares(const float* x, size_t n) const override { return train::sum_squares(x, n); }
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2,
             float eps, float weight_decay, float bc1, float bc2, float grad_scale) const override {
    train::adamw(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale);
  }
};

const CpuKernels kCpu;

}  // namespace

const Kernels& cpu_kernels() { return kCpu; }

void set_blas_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }

}  // namespace strata::train
