// strata-train on a device backend, end to end, on the emulated backend: the same losses
// as the host run, with the streams delayed at random too; checkpoints that move between
// the host and the device without losing a bit; devices that cannot be had, refused. And
// the MFU's two numbers: FLOPs per token and the card's peak.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "device/mfu.hpp"
#include "layout.hpp"
#include "train_proc.hpp"

using train_test::plus;
using train_test::rel_diff;
using train_test::run_train;
using train_test::TrainRun;
namespace st = strata::train;

namespace {

// Tiny, with a context shorter than a cache line of rows and heads of 12.
std::vector<std::string> args(int steps) {
  return {"--data",   STRATA_DATA_PATH, "--layers",     "2", "--heads",        "2", "--dim",        "24",
          "--ctx",    "16",             "--batch",      "4", "--steps",        std::to_string(steps),
          "--warmup", "4",              "--lr",         "3e-3", "--eval-every", "10", "--eval-batches", "2",
          "--sample-len", "0",          "--threads",    "1"};
}

const TrainRun& host_run() {
  static TrainRun r = run_train(0, plus(args(20), {"--device", "host"}));
  return r;
}

// Every loss of `r` within relative `bound` of the host run's; returns the worst.
double expect_host_losses(const TrainRun& r, double bound) {
  const TrainRun& h = host_run();
  double worst = 0;
  for (const auto& [step, loss] : r.loss) {
    EXPECT_TRUE(h.loss.count(step)) << "no host loss for step " << step;
    const double d = rel_diff(loss, h.loss.at(step));
    worst = std::max(worst, d);
    EXPECT_LE(d, bound) << "step " << step << ": " << loss << " vs host " << h.loss.at(step);
  }
  for (const auto& [step, loss] : r.val_loss)
    EXPECT_LE(rel_diff(loss, h.val_loss.at(step)), bound) << "validation at step " << step;
  return worst;
}

TEST(DeviceRuns, EmulatedGivesTheHostLossesFor20Steps) {
  const TrainRun& h = host_run();
  ASSERT_TRUE(h.ok()) << h.describe();
  ASSERT_EQ(h.loss.size(), 20u) << h.describe();
  TrainRun e = run_train(0, plus(args(20), {"--device", "emulated"}));
  ASSERT_TRUE(e.ok()) << e.describe();
  ASSERT_EQ(e.loss.size(), 20u) << e.describe();
  EXPECT_NE(e.proc.out.find("device emulated (emulated), fp32"), std::string::npos) << e.describe();
  const double worst = expect_host_losses(e, 1e-5);
  ASSERT_EQ(e.checksums.size(), 1u);
  std::cout << "emulated vs host, 20 steps: worst relative loss difference " << worst << "; parameters "
            << (e.checksums[0] == h.checksums[0] ? "bit-identical" : "differ") << " (" << e.checksums[0] << ")\n";
}

// Random delays before every stream task: an upload whose source is reused too early, or
// a download that does not wait, would show as a different loss.
TEST(DeviceRuns, EmulatedWithStreamDelays) {
  TrainRun e = run_train(0, plus(args(20), {"--device", "emulated", "--stop-at", "4"}), 90,
                         {{"STRATA_EMULATED_DELAY_US", "50"}});
  ASSERT_TRUE(e.ok()) << e.describe();
  ASSERT_EQ(e.loss.size(), 4u) << e.describe();
  expect_host_losses(e, 1e-5);
}

// Saved on the device at step 10, loaded on the host (the parameters it prints are the
// device's), continued there to 15 and saved, loaded on the device and run to 20: every
// loss printed and the final parameters are those of the uninterrupted host run, bit for
// bit. (The emulated backend computes what the host computes, in the same order, so any
// difference is something lost in moving.)
TEST(DeviceRuns, CheckpointsMoveBetweenDevicesBitExact) {
  const TrainRun& h = host_run();
  ASSERT_TRUE(h.ok()) << h.describe();
  const std::string a = train_test::make_temp_dir("device-ckpt-a"), b = train_test::make_temp_dir("device-ckpt-b");
  ASSERT_FALSE(a.empty() || b.empty());
  TrainRun saved = run_train(0, plus(args(20), {"--device", "emulated", "--stop-at", "10", "--save", a}));
  ASSERT_TRUE(saved.ok()) << saved.describe();
  TrainRun loaded = run_train(0, plus(args(20), {"--device", "host", "--resume", a, "--stop-at", "10"}));
  ASSERT_TRUE(loaded.ok()) << loaded.describe();
  ASSERT_EQ(loaded.checksums.size(), 1u);
  EXPECT_EQ(loaded.checksums[0], saved.checksums[0]) << "the host loaded other parameters than the device saved";

  TrainRun middle = run_train(0, plus(args(20), {"--device", "host", "--resume", a, "--stop-at", "15", "--save", b}));
  ASSERT_TRUE(middle.ok()) << middle.describe();
  // Loading is many uploads in a row: with the stream held back at random, reusing an
  // upload's pinned slot before its copy ran would load wrong bytes.
  TrainRun back = run_train(0, plus(args(20), {"--device", "emulated", "--resume", b, "--stop-at", "15"}), 90,
                            {{"STRATA_EMULATED_DELAY_US", "200"}});
  ASSERT_TRUE(back.ok()) << back.describe();
  ASSERT_EQ(back.checksums.size(), 1u);
  EXPECT_EQ(back.checksums[0], middle.checksums[0]) << "the device loaded other parameters than the host saved";
  TrainRun last = run_train(0, plus(args(20), {"--device", "emulated", "--resume", b}));
  ASSERT_TRUE(last.ok()) << last.describe();

  for (const TrainRun* r : {&middle, &last})
    for (const auto& [step, loss] : r->loss) EXPECT_EQ(loss, h.loss.at(step)) << "step " << step;
  EXPECT_EQ(middle.loss.size(), 5u);
  EXPECT_EQ(last.loss.size(), 5u);
  ASSERT_EQ(last.checksums.size(), 1u);
  EXPECT_EQ(last.checksums[0], h.checksums[0]) << "final parameters differ from the uninterrupted host run";
  std::cout << "emulated -> host at step 10 -> emulated at step 15 -> 20: losses and parameters ("
            << last.checksums[0] << ") equal the uninterrupted host run\n";
}

// A device that cannot be had is an error naming why, before any step.
TEST(DeviceRuns, DevicesThatCannotBeHadAreRefused) {
  struct Case {
    int ranks;
    std::vector<std::string> flags;
    std::map<std::string, std::string> env;
    std::string message;
  };
  std::vector<Case> cases = {
      {0, {"--device", "emulated"}, {{"STRATA_DEVICE", "none"}},
       "--device emulated, but the device backend is none (STRATA_DEVICE=none)"},
      {0, {"--device", "emulated", "--precision", "bf16"}, {}, "--precision bf16 needs --device cuda"},
      {2, {"--device", "emulated", "--on-failure", "shrink"}, {},
       "--device emulated with --on-failure shrink: going on after a failure is not implemented on a device"},
  };
  // No GPU here: cuda cannot be had, and the backend says why (no driver; or, in a build
  // without the CUDA backend such as the sanitizers', no libstrata-cuda.so).
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))
    cases.push_back({0, {"--device", "cuda"}, {}, "strata-train: error: --device cuda: cuda backend: "});
  for (const Case& c : cases) {
    TrainRun r = run_train(c.ranks, plus(args(20), c.flags), 60, c.env);
    EXPECT_FALSE(r.ok()) << r.describe();
    EXPECT_NE(r.proc.out.find(c.message), std::string::npos) << "expected: " << c.message << "\n" << r.describe();
    EXPECT_TRUE(r.loss.empty()) << r.describe();
  }
}

}  // namespace

// The MFU's FLOPs per token against a count made another way: 2 FLOPs per weight of every
// matrix a token meets in the forward (each layer's 2-D tensors of the layout, and the
// tied head, wte, used once more as the output projection), plus the attention's two
// products over the whole T x T square (2 T C each per token and layer), times 3 for the
// backward (PaLM's count).
TEST(Mfu, FlopsPerTokenCountsEveryProductOfTheModel) {
  for (const st::ModelConfig m : {st::ModelConfig{}, st::ModelConfig{256, 1024, 12, 12, 768},
                                  st::ModelConfig{256, 16, 2, 2, 24}}) {
    const st::ParamLayout layout(m, 1, 1 << 20);
    double matrix_weights = 0;
    for (const st::TensorInfo& t : layout.tensors())
      if (t.shape.size() == 2 && t.name.rfind("h.", 0) == 0) matrix_weights += static_cast<double>(t.full_size);
    matrix_weights += static_cast<double>(m.vocab) * m.dim;  // the head
    const double attention = 2.0 * 2 * m.layers * m.ctx * m.dim;
    const double want = 3 * (2 * matrix_weights + attention);
    EXPECT_DOUBLE_EQ(st::flops_per_token(m), want) << m.layers << " layers, dim " << m.dim << ", ctx " << m.ctx;
  }
}

// The card's peak: the more specific names first (an H100 PCIe is not an SXM), CUDA's names
// as the driver gives them, and none for a card not in the table.
TEST(Mfu, PeakOfEachCardByItsCudaName) {
  const std::vector<std::tuple<std::string, bool, double>> cases = {
      {"NVIDIA H100 80GB HBM3", true, 989}, {"NVIDIA H100 80GB HBM3", false, 67}, {"NVIDIA H100 PCIe", true, 756},
      {"NVIDIA H100 NVL", true, 835},       {"NVIDIA H200", true, 989},           {"NVIDIA H200 NVL", true, 835},
      {"NVIDIA A100-SXM4-80GB", true, 312}, {"NVIDIA A100-SXM4-80GB", false, 19.5}};
  for (const auto& [name, bf16, tflops] : cases) {
    const auto p = st::peak_flops(name, bf16);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->tflops, tflops) << name << (bf16 ? " bf16" : " fp32");
  }
  EXPECT_FALSE(st::peak_flops("NVIDIA GeForce RTX 4090", true));
}
