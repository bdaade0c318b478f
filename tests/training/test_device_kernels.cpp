// The device kernels (training/device: the functors and products every device backend
// runs) against the host kernels (kernels_cpu.cpp, which test_gradcheck checks against
// PyTorch), forward and backward, on awkward shapes: each output within 1e-5 relative of
// the host's (|d| <= 1e-5 |ref| + 1e-7 max|ref|, the floor for entries that cancel to
// about zero). The device is the emulated backend, or STRATA_TRAIN_TEST_DEVICE (cuda on a
// GPU machine, tests/training/gpu_checks.sh, where sums run in another order and the
// bound is 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "device/buffer.hpp"
#include "device/choose.hpp"
#include "kernels.hpp"
#include "rng.hpp"

namespace st = strata::train;

namespace {

std::string device_under_test() {
  const char* d = std::getenv("STRATA_TRAIN_TEST_DEVICE");
  return d && *d ? d : "emulated";
}

double bound() { return device_under_test() == "cuda" ? 1e-4 : 1e-5; }

class DeviceKernels : public ::testing::Test {
 protected:
  const st::Kernels& cpu = st::cpu_kernels();
  const st::Kernels& dev = st::kernels_for(device_under_test());
  st::Rng rng{2024};
  void attention_case(int B, int T, int C, int NH);

  std::vector<float> random(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * rng.normal();
    return v;
  }
  template <typename T>
  st::Buffer<T> up(const std::vector<T>& v) {
    st::Buffer<T> b(dev, v.size());
    dev.upload(b.data(), v.data(), v.size() * sizeof(T));
    return b;
  }
  // The device's result against the host's, element by element.
  void expect_close(const std::string& what, const st::Buffer<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const std::vector<float> g = got.to_host();
    double scale = 0;
    for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::fabs(static_cast<double>(g[i]) - want[i]);
      const double r = d == 0 ? 0 : d / (bound() * std::fabs(want[i]) + 1e-7 * scale);
      if (!(r <= worst)) worst = std::isnan(r) ? INFINITY : r, at = i;
    }
    EXPECT_LE(worst, 1.0) << what << "[" << at << "]: device " << g[at] << ", host " << want[at];
  }
};

// Sizes with nothing round about them: 3 sequences of 7, width 12 in 3 heads of 4, 10
// outputs, a vocabulary piece of 9 rows starting at 5 out of 19 tokens.
constexpr int B = 3, T = 7, N = B * T, C = 12, NH = 3, OC = 10, V = 19, kStart = 5, kRows = 9;

TEST_F(DeviceKernels, MatmulForwardWithAndWithoutBias) {
  auto inp = random(N * C), w = random(OC * C), b = random(OC);
  for (bool bias : {true, false}) {
    std::vector<float> out(N * OC);
    cpu.matmul_forward(out.data(), inp.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
    auto d_inp = up(inp), d_w = up(w), d_b = up(b);
    st::Buffer<float> d_out(dev, N * OC);
    dev.matmul_forward(d_out.data(), d_inp.data(), d_w.data(), bias ? d_b.data() : nullptr, N, C, OC);
    expect_close(bias ? "out (bias)" : "out", d_out, out);
  }
}

TEST_F(DeviceKernels, MatmulBackwardAccumulatesWeightAndBiasGradients) {
  auto dout = random(N * OC), inp = random(N * C), w = random(OC * C);
  auto dw = random(OC * C), db = random(OC);  // earlier gradients: both add to them
  std::vector<float> dinp(N * C);
  auto d_dout = up(dout), d_inp = up(inp), d_w = up(w), d_dw = up(dw), d_db = up(db);
  st::Buffer<float> d_dinp(dev, N * C);
  cpu.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  dev.matmul_backward(d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), N, C, OC);
  expect_close("dinp", d_dinp, dinp);
  expect_close("dw", d_dw, dw);
  expect_close("db", d_db, db);
}

TEST_F(DeviceKernels, LayerNormForwardAndBackward) {
  auto inp = random(N * C, 3.0f), w = random(C), b = random(C), dout = random(N * C);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
  auto d_inp = up(inp), d_w = up(w), d_b = up(b);
  st::Buffer<float> d_out(dev, N * C), d_mean(dev, N), d_rstd(dev, N);
  dev.layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(), d_w.data(), d_b.data(), N, C);
  expect_close("out", d_out, out);
  expect_close("mean", d_mean, mean);
  expect_close("rstd", d_rstd, rstd);

  auto dinp = random(N * C), dw = random(C), db = random(C);  // all three accumulate
  auto d_dinp = up(dinp), d_dw = up(dw), d_db = up(db), d_dout = up(dout);
  cpu.layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
  dev.layernorm_backward(d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(),
                         d_mean.data(), d_rstd.data(), N, C);
  expect_close("dinp", d_dinp, dinp);
  expect_close("dw", d_dw, dw);
  expect_close("db", d_db, db);
}

// B sequences of T, width C in NH heads.
void DeviceKernels::attention_case(int B, int T, int C, int NH) {
  const int N = B * T;
  auto qkv = random(N * 3 * C), dout = random(N * C);
  std::vector<float> out(N * C), att(B * NH * T * T), dqkv(N * 3 * C), scratch(cpu.attention_scratch(T, NH));
  cpu.attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  cpu.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  auto d_qkv = up(qkv), d_dout = up(dout);
  st::Buffer<float> d_out(dev, N * C), d_att(dev, att.size()), d_dqkv(dev, dqkv.size()),
      d_scratch(dev, dev.attention_scratch(T, NH));
  dev.attention_forward(d_out.data(), d_att.data(), d_qkv.data(), B, T, C, NH);
  expect_close("out", d_out, out);
  expect_close("att", d_att, att);
  dev.attention_backward(d_dqkv.data(), d_scratch.data(), d_dout.data(), d_qkv.data(), d_att.data(), B, T, C, NH);
  expect_close("dqkv", d_dqkv, dqkv);
}

TEST_F(DeviceKernels, CausalAttentionForwardAndBackward) { attention_case(B, T, C, NH); }

// Buffers of whole pages (qkv 3, att 4, the scratch 1), as the emulated allocations are:
// a product whose operand runs past the end of its buffer (the last sequence's q, k or v
// read as T whole rows of qkv) is refused (Gemm::span_a, emulated_kernels.cpp).
TEST_F(DeviceKernels, AttentionOperandsStayInsideTheirBuffers) { attention_case(4, 16, 16, 4); }

TEST_F(DeviceKernels, GeluForwardAndBackwardInPlace) {
  const size_t n = 1001;
  auto inp = random(n, 4.0f), dout = random(n);
  std::vector<float> out(n), dinp = dout;
  cpu.gelu_forward(out.data(), inp.data(), n);
  cpu.gelu_backward(dinp.data(), inp.data(), dinp.data(), n);  // dinp aliases dout, as the model calls it
  auto d_inp = up(inp), d_grad = up(dout);
  st::Buffer<float> d_out(dev, n);
  dev.gelu_forward(d_out.data(), d_inp.data(), n);
  dev.gelu_backward(d_grad.data(), d_inp.data(), d_grad.data(), n);
  expect_close("out", d_out, out);
  expect_close("dinp", d_grad, dinp);
}

TEST_F(DeviceKernels, ResidualAdd) {
  const size_t n = 777;
  auto y = random(n), x = random(n);
  auto d_y = up(y), d_x = up(x);
  cpu.add_inplace(y.data(), x.data(), n);
  dev.add_inplace(d_y.data(), d_x.data(), n);
  expect_close("y", d_y, y);
}

TEST_F(DeviceKernels, EmbeddingOfAVocabularyPieceForwardAndBackward) {
  std::vector<int> tokens(N);
  for (int& t : tokens) t = static_cast<int>(rng.next() % V);  // some in the piece, some not
  tokens[0] = tokens[4] = kStart + 2;                         // a row used twice sums both
  auto wte = random(kRows * C), wpe = random(T * C), dout = random(N * C);
  auto d_tokens = up(tokens);
  auto d_wte = up(wte), d_wpe = up(wpe), d_dout = up(dout);
  for (bool positions : {true, false}) {
    std::vector<float> out(N * C);
    cpu.embed_forward(out.data(), tokens.data(), wte.data(), kStart, kRows, positions ? wpe.data() : nullptr, B, T, C);
    st::Buffer<float> d_out(dev, N * C);
    dev.embed_forward(d_out.data(), d_tokens.data(), d_wte.data(), kStart, kRows, positions ? d_wpe.data() : nullptr,
                      B, T, C);
    expect_close(positions ? "out (with positions)" : "out", d_out, out);

    auto dwte = random(kRows * C), dwpe = random(T * C);  // both accumulate
    auto d_dwte = up(dwte), d_dwpe = up(dwpe);
    cpu.embed_backward(dwte.data(), positions ? dwpe.data() : nullptr, dout.data(), tokens.data(), kStart, kRows, B,
                       T, C);
    dev.embed_backward(d_dwte.data(), positions ? d_dwpe.data() : nullptr, d_dout.data(), d_tokens.data(), kStart,
                       kRows, B, T, C);
    expect_close("dwte", d_dwte, dwte);
    expect_close("dwpe", d_dwpe, dwpe);
  }
}

// The three passes and the backward over a piece of the vocabulary (targets inside and
// outside it), with and without targets; the mean loss comes back to the host.
TEST_F(DeviceKernels, VocabularyParallelCrossEntropyPasses) {
  std::vector<int> targets(N);
  for (int& t : targets) t = static_cast<int>(rng.next() % V);
  targets[1] = kStart, targets[2] = kStart + kRows - 1, targets[3] = kStart - 1;  // the edges
  for (bool with_targets : {true, false}) {
    auto logits = random(N * kRows, 5.0f);
    std::vector<float> maxes(N), sums(2 * N), losses(N);
    const int* tg = with_targets ? targets.data() : nullptr;
    auto d_logits = up(logits), d_losses = up(losses);
    auto d_targets = up(targets);
    st::Buffer<float> d_maxes(dev, N), d_sums(dev, 2 * N);
    const int* d_tg = with_targets ? d_targets.data() : nullptr;

    cpu.softmax_max(maxes.data(), logits.data(), N, kRows);
    dev.softmax_max(d_maxes.data(), d_logits.data(), N, kRows);
    expect_close("maxes", d_maxes, maxes);
    cpu.softmax_exp(logits.data(), sums.data(), maxes.data(), tg, kStart, N, kRows);
    dev.softmax_exp(d_logits.data(), d_sums.data(), d_maxes.data(), d_tg, kStart, N, kRows);
    expect_close("exps", d_logits, logits);
    expect_close("sums", d_sums, sums);
    const float mean = cpu.softmax_xent_finish(logits.data(), losses.data(), sums.data(), maxes.data(), with_targets,
                                               N, kRows);
    const float d_mean = dev.softmax_xent_finish(d_logits.data(), d_losses.data(), d_sums.data(), d_maxes.data(),
                                                 with_targets, N, kRows);
    expect_close("probs", d_logits, logits);
    expect_close("losses", d_losses, losses);
    EXPECT_LE(std::fabs(d_mean - mean), bound() * std::fabs(mean)) << "mean loss " << d_mean << " vs " << mean;
    if (!with_targets) continue;
    cpu.softmax_xent_backward(logits.data(), tg, kStart, N, kRows, 0.37f);
    dev.softmax_xent_backward(d_logits.data(), d_tg, kStart, N, kRows, 0.37f);
    expect_close("dlogits", d_logits, logits);
  }
}

TEST_F(DeviceKernels, SumOfSquaresAndAdamW) {
  for (size_t n : {size_t(1), size_t(4099), size_t(300007)}) {
    auto x = random(n);
    auto d_x = up(x);
    const double want = cpu.sum_squares(x.data(), n), got = dev.sum_squares(d_x.data(), n);
    EXPECT_LE(std::fabs(got - want), 1e-12 * want) << n << " elements: " << got << " vs " << want;
  }
  const size_t n = 1003;
  auto p = random(n), g = random(n), m = random(n, 0.1f), v = random(n, 0.1f);
  for (float& e : v) e = std::fabs(e);
  auto d_p = up(p), d_g = up(g), d_m = up(m), d_v = up(v);
  for (int t = 1; t <= 3; ++t) {
    const float bc1 = 1.0f - std::pow(0.9f, float(t)), bc2 = 1.0f - std::pow(0.95f, float(t));
    cpu.adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.6f);
    dev.adamw(d_p.data(), d_g.data(), d_m.data(), d_v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.6f);
  }
  expect_close("p", d_p, p);
  expect_close("m", d_m, m);
  expect_close("v", d_v, v);
}

TEST_F(DeviceKernels, MemoryMovesAndZeroes) {
  std::vector<float> a = random(3001), back(3001);
  st::Buffer<float> d(dev, a.size()), e(dev, a.size());
  EXPECT_EQ(e.to_host(), std::vector<float>(a.size(), 0.0f)) << "alloc gives zeroed memory";
  dev.upload(d.data(), a.data(), a.size() * sizeof(float));
  a.assign(a.size(), -1.0f);  // the source may be reused at once
  dev.copy(e.data(), d.data(), 3000 * sizeof(float));
  dev.zero(d.data(), 10 * sizeof(float));
  const std::vector<float> got = e.to_host(), zeroed = d.to_host(0, 11);
  EXPECT_NE(got[0], -1.0f);
  EXPECT_EQ(got[3000], 0.0f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(zeroed[i], 0.0f);
  EXPECT_EQ(zeroed[10], got[10]);
}

}  // namespace
