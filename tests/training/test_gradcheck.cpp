// Gradient check of the serial model against PyTorch. The test writes a tiny model's
// weights and a batch to a file, training/reference/gpt_reference.py rebuilds the same
// model with torch modules and autograd (in float64), and sends back the loss, every
// gradient, and the losses and parameters after a few steps of clipping + AdamW. Our fp32
// results must match within |ours - ref| <= 1e-5 + 1e-4 * |ref| for every element.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grad_sync.hpp"
#include "group.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "rng.hpp"
#include "tests/common/process.hpp"

namespace st = strata::train;

namespace {

constexpr double kRel = 1e-4, kAbs = 1e-5;

template <class T>
void put(std::ofstream& f, const T* p, size_t n) {
  f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n * sizeof(T)));
}

struct Check {
  double worst = 0;  // largest |diff| / (kAbs + kRel |ref|)
  double worst_abs = 0;
  std::string where;
  // Only elements with select[i] == want count (all when select is null); tol overrides
  // the default tolerance when > 0.
  void add(const std::string& name, const float* ours, const double* ref, size_t n,
           const std::vector<bool>* select = nullptr, bool want = true, double tol = 0) {
    for (size_t i = 0; i < n; ++i) {
      if (select && (*select)[i] != want) continue;
      double d = std::fabs(ours[i] - ref[i]);
      double ratio = d / (tol > 0 ? tol : kAbs + kRel * std::fabs(ref[i]));
      if (!(ratio <= worst)) {  // NaN lands here too
        worst = std::isnan(ratio) ? INFINITY : ratio;
        worst_abs = d;
        where = name + "[" + std::to_string(i) + "]";
      }
    }
  }
  bool ok() const { return worst <= 1.0; }
};

TEST(GradCheck, MatchesPyTorch) {
  std::string py = strata_test::find_torch_python();
  if (py.empty())
    GTEST_SKIP() << "PyTorch not available (python3 -c 'import torch' fails; "
                    "apt-get install python3-torch or set STRATA_PYTHON)";

  // Tiny but complete: 2 layers, 2 heads, T < ctx (unused positions get zero gradient).
  st::ModelConfig cfg{256, 16, 2, 2, 16};
  const int B = 3, T = 12, steps = 3;
  const float lr = 1e-2f, wd = 0.1f, clip = 0.5f, beta1 = 0.9f, beta2 = 0.95f;
  st::ParamLayout layout(cfg, 1, 1 << 20);
  std::vector<float> params(layout.padded_size());
  st::init_params(layout, params.data(), 7);
  // Push every tensor away from its special initial value (unit gains, zero biases) and
  // make the weights large enough that attention and GELU are far from linear.
  st::Rng rng(99);
  for (const auto& t : layout.tensors()) {
    bool gain = !t.decay && t.name.ends_with(".weight");
    for (size_t i = 0; i < t.size; ++i)
      params[t.offset + i] = gain ? 1.0f + 0.2f * rng.normal() : 0.3f * rng.normal();
  }
  std::vector<int> inputs(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    inputs[i] = static_cast<int>(rng.below(256));
    targets[i] = static_cast<int>(rng.below(256));
  }

  const size_t P = layout.num_params();
  char dir_tmpl[] = "/tmp/strata-gradcheck-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  std::string dir = dir_tmpl, in_path = dir + "/in.bin", out_path = dir + "/out.bin";
  {
    std::ofstream f(in_path, std::ios::binary);
    int32_t hdr[8] = {cfg.vocab, cfg.ctx, cfg.layers, cfg.heads, cfg.dim, B, T, steps};
    float hp[5] = {lr, wd, clip, beta1, beta2};
    put(f, hdr, 8);
    put(f, hp, 5);
    std::vector<float> canon(P);
    st::flat_to_canonical(layout, params.data(), canon.data());
    put(f, canon.data(), P);
    put(f, inputs.data(), inputs.size());
    put(f, targets.data(), targets.size());
  }
  std::string cmd = py + " " + STRATA_REFERENCE_PY + " " + in_path + " " + out_path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string pyout;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) pyout.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << cmd << "\n" << pyout;

  std::vector<double> ref_loss(steps + 1), ref_grad(P), ref_final(P);
  {
    std::ifstream f(out_path, std::ios::binary);
    f.read(reinterpret_cast<char*>(ref_loss.data()), ref_loss.size() * sizeof(double));
    f.read(reinterpret_cast<char*>(ref_grad.data()), P * sizeof(double));
    f.read(reinterpret_cast<char*>(ref_final.data()), P * sizeof(double));
    ASSERT_TRUE(f.good()) << "short output from " << cmd << "\n" << pyout;
  }
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  rmdir(dir.c_str());

  // Ours, through the same path strata-train uses (GradSync on a single-process group).
  const st::Kernels& k = st::cpu_kernels();
  st::Group group;
  st::GradSync sync(group, layout, 0, k);
  st::StepClock clock;
  st::TensorParallel tp(group, false, clock);
  st::FlatWeights weights(layout, params.data());
  st::Gpt model(layout, layout.partition().chunks[0], weights, k, tp, B);
  auto acts = model.make_activations();
  st::AdamW opt(st::AdamWConfig{lr, beta1, beta2, 1e-8f, wd}, sync.state_size(), k);

  Check grads, losses, final, final_noise;
  std::vector<float> ours_grad(P), canon(P);
  std::vector<float> our_loss;
  for (int s = 0; s <= steps; ++s) {
    sync.begin_step();
    our_loss.push_back(model.forward(*acts, inputs.data(), targets.data(), B, T));
    if (s == steps) break;
    model.backward(*acts, sync, 1.0f);
    sync.finish();
    if (s == 0) {
      for (const auto& t : layout.tensors()) {
        size_t c = 0;
        for (const auto& u : layout.tensors()) {
          if (&u == &t) break;
          c += u.size;
        }
        grads.add(t.name, sync.grads() + t.offset, ref_grad.data() + c, t.size);
      }
    }
    double norm = sync.global_norm(k);
    opt.step(k, sync.segments(), params.data(), sync.grads(), s + 1, lr,
             st::clip_scale(norm, clip));
  }
  for (int s = 0; s <= steps; ++s) {
    float l = our_loss[s];
    losses.add("loss after " + std::to_string(s) + " steps", &l, &ref_loss[s], 1);
  }
  // Some gradients are exactly zero in exact arithmetic (the attention key bias: adding a
  // constant to every key does not change a softmax), so both sides hold rounding noise
  // there (fp32 ~1e-9, float64 ~1e-17), and Adam, which divides by the gradient's own
  // scale, turns any noise into a step of about lr. Those elements may differ by the
  // steps Adam can take; every other parameter gets the normal tolerance.
  std::vector<bool> noise(P);
  size_t n_noise = 0;
  for (size_t i = 0; i < P; ++i) n_noise += noise[i] = std::fabs(ref_grad[i]) < 1e-7;
  st::flat_to_canonical(layout, params.data(), canon.data());
  std::string what = "parameters after " + std::to_string(steps) + " AdamW steps";
  final.add(what, canon.data(), ref_final.data(), P, &noise, false);
  final_noise.add(what, canon.data(), ref_final.data(), P, &noise, true, steps * lr * 1.01);

  char line[512];
  std::snprintf(line, sizeof line,
                "gradcheck vs PyTorch (float64 reference, %zu parameters, %zu tensors): loss "
                "%.6f vs %.6f | worst gradient error %.2e at %s | losses over %d AdamW steps "
                "worst %.2e | params worst %.2e (%zu more with a zero reference gradient: %.1e <= "
                "%d lr) | tolerance |d| <= %.0e + %.0e|ref| | %s",
                P, layout.tensors().size(), our_loss[0], ref_loss[0], grads.worst_abs,
                grads.where.c_str(), steps, losses.worst_abs, final.worst_abs, n_noise,
                final_noise.worst_abs, steps, kAbs, kRel,
                grads.ok() && losses.ok() && final.ok() && final_noise.ok() ? "PASS" : "FAIL");
  std::cout << line << "\n";
  EXPECT_TRUE(grads.ok()) << "gradient " << grads.where << " off by " << grads.worst_abs;
  EXPECT_TRUE(losses.ok()) << losses.where << " off by " << losses.worst_abs;
  EXPECT_TRUE(final.ok()) << final.where << " off by " << final.worst_abs;
  EXPECT_TRUE(final_noise.ok()) << final_noise.where << " off by " << final_noise.worst_abs;
}

}  // namespace
