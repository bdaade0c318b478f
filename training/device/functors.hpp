// The trainer's device kernels, written once as functors that g++ (the emulated backend)
// and nvcc (training/cuda) both compile (STRATA_HD), in two shapes:
//
//   per row      f(row, lanes): one row of a matrix (a token's LayerNorm, a softmax row,
//                a column's sum). `lanes` are the workers of the row: on the CPU one lane
//                (OneLane below), on CUDA the threads of a block. Lane l takes elements
//                l, l + count, ...; lanes.sum / lanes.max combine their partial results
//                (warp shuffles on CUDA) and give every lane the total, so they must be
//                called by all lanes alike.
//   per element  f(i): AdamW, GELU, the residual add.
//
// With one lane every sum runs in the order the host kernels (kernels_cpu.cpp) use, and
// every expression is theirs, so the emulated backend reproduces the host's results;
// accumulating into a gradient (+=) starts from its old value in lane 0 for the same
// reason. Each functor lists its pointers (pointers(v)), which is how the emulated
// backend gives a task its views of device memory (ground/device/execution.hpp).
//
// C++17: nvcc compiles this too.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/math.hpp"
#include "ground/half.hpp"
#include "ground/host_device.hpp"

namespace strata::train::device_kernels {
namespace {

// A row run by one worker: every combination is the value itself.
struct OneLane {
  STRATA_HD int lane() const { return 0; }
  STRATA_HD int count() const { return 1; }
  template <typename T>
  STRATA_HD T sum(T x) const { return x; }
  template <typename T>
  STRATA_HD T max(T x) const { return x; }
};

STRATA_HD inline float minus_infinity() { return bits_float(0xff800000u); }
// std::max's choice (the first unless the second is larger), on both compilers.
STRATA_HD inline float larger(float a, float b) { return a < b ? b : a; }

// ---- embedding ---------------------------------------------------------------------

// Row b*T + t: out = wte[tokens - vocab_start] (when this piece holds the token) + wpe[t].
struct EmbedForward {
  float* out;
  const int* tokens;
  const float* wte;
  const float* wpe;  // may be null
  int vocab_start, vocab_rows, T, C;
  template <typename V> void pointers(V&& v) { v(out), v(tokens), v(wte), v(wpe); }
  template <typename L>
  STRATA_HD void operator()(int row, const L& l) const {
    const int r = tokens[row] - vocab_start;
    const float* e = r >= 0 && r < vocab_rows ? wte + static_cast<size_t>(r) * C : nullptr;
    const float* p = wpe ? wpe + static_cast<size_t>(row % T) * C : nullptr;
    float* o = out + static_cast<size_t>(row) * C;
    for (int i = l.lane(); i < C; i += l.count()) o[i] = (e ? e[i] : 0.0f) + (p ? p[i] : 0.0f);
  }
};

// Row v of this piece's wte: += dout of every token row whose token it is, in row order.
struct EmbedBackwardWte {
  float* dwte;
  const float* dout;
  const int* tokens;
  int vocab_start, N, C;
  template <typename V> void pointers(V&& v) { v(dwte), v(dout), v(tokens); }
  template <typename L>
  STRATA_HD void operator()(int v, const L& l) const {
    float* e = dwte + static_cast<size_t>(v) * C;
    for (int i = l.lane(); i < C; i += l.count()) {
      float acc = e[i];
      for (int n = 0; n < N; ++n)
        if (tokens[n] - vocab_start == v) acc += dout[static_cast<size_t>(n) * C + i];
      e[i] = acc;
    }
  }
};

// Row t of wpe: += dout of position t of every sequence, in sequence order.
struct EmbedBackwardWpe {
  float* dwpe;
  const float* dout;
  int B, T, C;
  template <typename V> void pointers(V&& v) { v(dwpe), v(dout); }
  template <typename L>
  STRATA_HD void operator()(int t, const L& l) const {
    float* p = dwpe + static_cast<size_t>(t) * C;
    for (int i = l.lane(); i < C; i += l.count()) {
      float acc = p[i];
      for (int b = 0; b < B; ++b) acc += dout[(static_cast<size_t>(b) * T + t) * C + i];
      p[i] = acc;
    }
  }
};

// ---- LayerNorm ---------------------------------------------------------------------

struct LayerNormForward {
  float* out;
  float* mean;
  float* rstd;
  const float* inp;
  const float* w;
  const float* b;
  int C;
  template <typename V> void pointers(V&& v) { v(out), v(mean), v(rstd), v(inp), v(w), v(b); }
  template <typename L>
  STRATA_HD void operator()(int row, const L& l) const {
    const float* x = inp + static_cast<size_t>(row) * C;
    float* y = out + static_cast<size_t>(row) * C;
    float m = 0;
    for (int i = l.lane(); i < C; i += l.count()) m += x[i];
    m = l.sum(m);
    m /= C;
    float var = 0;
    for (int i = l.lane(); i < C; i += l.count()) var += (x[i] - m) * (x[i] - m);
    var = l.sum(var);
    var /= C;
    float s = 1.0f / sqrtf(var + math::kLayerNormEps);
    for (int i = l.lane(); i < C; i += l.count()) y[i] = (x[i] - m) * s * w[i] + b[i];
    if (l.lane() == 0) mean[row] = m, rstd[row] = s;
  }
};

// dinp += the input gradient of each row.
struct LayerNormBackward {
  float* dinp;
  const float* dout;
  const float* inp;
  const float* w;
  const float* mean;
  const float* rstd;
  int C;
  template <typename V> void pointers(V&& v) { v(dinp), v(dout), v(inp), v(w), v(mean), v(rstd); }
  template <typename L>
  STRATA_HD void operator()(int row, const L& l) const {
    const size_t at = static_cast<size_t>(row) * C;
    const float *dy = dout + at, *x = inp + at;
    float* dx = dinp + at;
    const float m = mean[row], s = rstd[row];
    // The normalised input's gradient minus its projections on 1 and on xhat.
    float dnorm_mean = 0, dnorm_xhat_mean = 0;
    for (int i = l.lane(); i < C; i += l.count()) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * w[i];
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * xhat;
    }
    dnorm_mean = l.sum(dnorm_mean);
    dnorm_xhat_mean = l.sum(dnorm_xhat_mean);
    dnorm_mean /= C;
    dnorm_xhat_mean /= C;
    for (int i = l.lane(); i < C; i += l.count()) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * w[i];
      dx[i] += s * (dnorm - dnorm_mean - xhat * dnorm_xhat_mean);
    }
  }
};

// Row i of the gains: dw[i] += sum over rows of dout * xhat, db[i] += sum of dout.
struct LayerNormBackwardParams {
  float* dw;
  float* db;
  const float* dout;
  const float* inp;
  const float* mean;
  const float* rstd;
  int N, C;
  template <typename V> void pointers(V&& v) { v(dw), v(db), v(dout), v(inp), v(mean), v(rstd); }
  template <typename L>
  STRATA_HD void operator()(int i, const L& l) const {
    float aw = l.lane() == 0 ? dw[i] : 0.0f, ab = l.lane() == 0 ? db[i] : 0.0f;
    for (int n = l.lane(); n < N; n += l.count()) {
      const size_t at = static_cast<size_t>(n) * C + i;
      float xhat = (inp[at] - mean[n]) * rstd[n];
      ab += dout[at];
      aw += dout[at] * xhat;
    }
    aw = l.sum(aw);
    ab = l.sum(ab);
    if (l.lane() == 0) dw[i] = aw, db[i] = ab;
  }
};

// ---- matrix products' companions -----------------------------------------------------

// Row n of out[N, OC] = b (what the product then adds to).
struct BiasRows {
  float* out;
  const float* b;
  int OC;
  template <typename V> void pointers(V&& v) { v(out), v(b); }
  template <typename L>
  STRATA_HD void operator()(int row, const L& l) const {
    float* o = out + static_cast<size_t>(row) * OC;
    for (int i = l.lane(); i < OC; i += l.count()) o[i] = b[i];
  }
};

// Column o: db[o] += the sum of dout[:, o].
struct ColumnSums {
  float* db;
  const float* dout;
  int N, OC;
  template <typename V> void pointers(V&& v) { v(db), v(dout); }
  template <typename L>
  STRATA_HD void operator()(int o, const L& l) const {
    float acc = l.lane() == 0 ? db[o] : 0.0f;
    for (int n = l.lane(); n < N; n += l.count()) acc += dout[static_cast<size_t>(n) * OC + o];
    acc = l.sum(acc);
    if (l.lane() == 0) db[o] = acc;
  }
};

// ---- attention ------------------------------------------------------------------------

// Row r of the [.., T, T] scores (already scaled), position t = r % T: the softmax over
// keys 0..t in place, zeros after.
struct CausalSoftmax {
  float* att;
  int T;
  template <typename V> void pointers(V&& v) { v(att); }
  template <typename L>
  STRATA_HD void operator()(int r, const L& l) const {
    const int t = r % T;
    float* p = att + static_cast<size_t>(r) * T;
    float mx = minus_infinity();
    for (int j = l.lane(); j <= t; j += l.count()) mx = larger(mx, p[j]);
    mx = l.max(mx);
    float sum = 0;
    for (int j = l.lane(); j <= t; j += l.count()) {
      p[j] = expf(p[j] - mx);
      sum += p[j];
    }
    sum = l.sum(sum);
    float inv = 1.0f / sum;
    for (int j = l.lane(); j <= t; j += l.count()) p[j] *= inv;
    for (int j = t + 1 + l.lane(); j < T; j += l.count()) p[j] = 0.0f;
  }
};

// Row r: the probabilities' gradient dp becomes the scores' in place,
// dS = P * (dP - rowsum(P * dP)); masked entries (P = 0) become 0.
struct CausalSoftmaxBackward {
  float* dp;
  const float* att;
  int T;
  template <typename V> void pointers(V&& v) { v(dp), v(att); }
  template <typename L>
  STRATA_HD void operator()(int r, const L& l) const {
    const int t = r % T;
    const float* p = att + static_cast<size_t>(r) * T;
    float* d = dp + static_cast<size_t>(r) * T;
    float dot = 0;
    for (int j = l.lane(); j <= t; j += l.count()) dot += p[j] * d[j];
    dot = l.sum(dot);
    for (int j = l.lane(); j <= t; j += l.count()) d[j] = p[j] * (d[j] - dot);
    for (int j = t + 1 + l.lane(); j < T; j += l.count()) d[j] = 0.0f;
  }
};

// ---- cross-entropy over a (tensor-parallel piece of the) vocabulary ---------------------

struct SoftmaxMax {
  float* maxes;
  const float* logits;
  int V;
  template <typename P> void pointers(P&& v) { v(maxes), v(logits); }
  template <typename L>
  STRATA_HD void operator()(int n, const L& l) const {
    const float* row = logits + static_cast<size_t>(n) * V;
    float mx = minus_infinity();
    for (int i = l.lane(); i < V; i += l.count()) mx = larger(mx, row[i]);
    mx = l.max(mx);
    if (l.lane() == 0) maxes[n] = mx;
  }
};

// Row n: exp(logit - max) in place, their sum in sums[n], and with targets the target's
// logit (read before it is overwritten, by the lane that owns it) in sums[N + n].
struct SoftmaxExp {
  float* logits;
  float* sums;
  const float* maxes;
  const int* targets;  // may be null
  int vocab_start, N, V;
  template <typename P> void pointers(P&& v) { v(logits), v(sums), v(maxes), v(targets); }
  template <typename L>
  STRATA_HD void operator()(int n, const L& l) const {
    float* row = logits + static_cast<size_t>(n) * V;
    const int col = targets ? targets[n] - vocab_start : -1;
    const float mx = maxes[n];
    float target = 0, sum = 0;
    for (int i = l.lane(); i < V; i += l.count()) {
      if (i == col) target = row[i];
      row[i] = expf(row[i] - mx);
      sum += row[i];
    }
    sum = l.sum(sum);
    if (targets) target = l.sum(target);  // one lane holds it, the others add zeros
    if (l.lane() == 0) {
      sums[n] = sum;
      if (targets) sums[N + n] = target;
    }
  }
};

// Row n: probabilities in place and, with targets, the row's loss.
struct SoftmaxXentFinish {
  float* probs;
  float* losses;
  const float* sums;
  const float* maxes;
  bool targets;
  int N, V;
  template <typename P> void pointers(P&& v) { v(probs), v(losses), v(sums), v(maxes); }
  template <typename L>
  STRATA_HD void operator()(int n, const L& l) const {
    float* row = probs + static_cast<size_t>(n) * V;
    const float inv = 1.0f / sums[n];
    for (int i = l.lane(); i < V; i += l.count()) row[i] *= inv;
    if (targets && l.lane() == 0) losses[n] = logf(sums[n]) + maxes[n] - sums[N + n];
  }
};

// One row: out[0] = the mean of losses[0..N), summed in double.
struct MeanLoss {
  float* out;
  const float* losses;
  int N;
  template <typename P> void pointers(P&& v) { v(out), v(losses); }
  template <typename L>
  STRATA_HD void operator()(int, const L& l) const {
    double total = 0;
    for (int n = l.lane(); n < N; n += l.count()) total += losses[n];
    total = l.sum(total);
    if (l.lane() == 0) out[0] = static_cast<float>(total / N);
  }
};

// Row n in place: dlogits = (probs - onehot(target - vocab_start)) * scale.
struct SoftmaxXentBackward {
  float* probs;
  const int* targets;
  int vocab_start, V;
  float scale;
  template <typename P> void pointers(P&& v) { v(probs), v(targets); }
  template <typename L>
  STRATA_HD void operator()(int n, const L& l) const {
    float* row = probs + static_cast<size_t>(n) * V;
    const int col = targets[n] - vocab_start;
    for (int i = l.lane(); i < V; i += l.count()) {
      float p = row[i];
      if (i == col) p -= 1.0f;
      row[i] = p * scale;
    }
  }
};

// ---- the optimizer's reductions and update ------------------------------------------------

// Row r: partial[r] = the sum of squares of x[r * chunk, (r + 1) * chunk) in double.
struct SumSquaresRows {
  double* partial;
  const float* x;
  size_t n, chunk;
  template <typename P> void pointers(P&& v) { v(partial), v(x); }
  template <typename L>
  STRATA_HD void operator()(int r, const L& l) const {
    const size_t from = static_cast<size_t>(r) * chunk, to = from + chunk < n ? from + chunk : n;
    double s = 0;
    for (size_t i = from + l.lane(); i < to; i += l.count()) s += static_cast<double>(x[i]) * x[i];
    s = l.sum(s);
    if (l.lane() == 0) partial[r] = s;
  }
};

// One row: out[0] = partial[0] + ... + partial[count - 1].
struct SumRows {
  double* out;
  const double* partial;
  int count;
  template <typename P> void pointers(P&& v) { v(out), v(partial); }
  template <typename L>
  STRATA_HD void operator()(int, const L& l) const {
    double s = 0;
    for (int r = l.lane(); r < count; r += l.count()) s += partial[r];
    s = l.sum(s);
    if (l.lane() == 0) out[0] = s;
  }
};

struct AdamW {
  float* p;
  const float* g;
  float* m;
  float* v;
  float lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale;
  template <typename P> void pointers(P&& f) { f(p), f(g), f(m), f(v); }
  STRATA_HD void operator()(size_t i) const {
    float grad = g[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * grad;
    v[i] = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    float mhat = m[i] / bc1, vhat = v[i] / bc2;
    // Decoupled decay (as torch.optim.AdamW): shrink the weight, then take the Adam step.
    p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p[i]);
  }
};

// ---- element-wise ---------------------------------------------------------------------

struct GeluForward {
  float* out;
  const float* inp;
  template <typename P> void pointers(P&& v) { v(out), v(inp); }
  STRATA_HD void operator()(size_t i) const { out[i] = math::gelu(inp[i]); }
};

struct GeluBackward {
  float* dinp;  // may be dout
  const float* inp;
  const float* dout;
  template <typename P> void pointers(P&& v) { v(dinp), v(inp), v(dout); }
  STRATA_HD void operator()(size_t i) const { dinp[i] = math::gelu_grad(inp[i]) * dout[i]; }
};

struct ToBf16 {
  uint16_t* out;
  const float* in;
  template <typename P> void pointers(P&& v) { v(out), v(in); }
  STRATA_HD void operator()(size_t i) const { out[i] = float_to_bf16(in[i]); }
};

struct FromBf16 {
  float* out;
  const uint16_t* in;
  float scale;
  template <typename P> void pointers(P&& v) { v(out), v(in); }
  STRATA_HD void operator()(size_t i) const { out[i] = bf16_to_float(in[i]) * scale; }
};

struct AddInplace {
  float* y;
  const float* x;
  template <typename P> void pointers(P&& v) { v(y), v(x); }
  STRATA_HD void operator()(size_t i) const { y[i] += x[i]; }
};

}  // namespace
}  // namespace strata::train::device_kernels
