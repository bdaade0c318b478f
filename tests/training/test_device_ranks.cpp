// strata-train on the emulated device with several ranks under strata-run: the trainer's
// groups on the communicator's stream forms (training/group.hpp). Each layout trains 20
// steps with the losses (1e-5) and the final parameters (bit for bit) of the same layout
// on the host, with every stream task delayed at random (a collective not ordered after
// the kernels that write its input, or before the ones that read its output, would read
// or leave stale values and change a loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "train_proc.hpp"

using train_test::plus;
using train_test::rel_diff;
using train_test::run_train;
using train_test::TrainRun;

namespace {

// The tiny model of test_device_runs.cpp, with four layers so that an interleaved pipeline
// of two stages has a layer per virtual stage.
std::vector<std::string> args() {
  return {"--data",   STRATA_DATA_PATH, "--layers",     "4",    "--heads",      "2", "--dim",          "24",
          "--ctx",    "16",             "--batch",      "4",    "--steps",      "20", "--warmup",      "4",
          "--lr",     "3e-3",           "--eval-every", "10",   "--eval-batches", "2", "--sample-len", "0",
          "--threads", "1"};
}

struct Layout {
  std::string name;
  int ranks;
  std::vector<std::string> flags;
};

class DeviceRanks : public testing::TestWithParam<Layout> {};

TEST_P(DeviceRanks, EmulatedGivesTheHostLossesFor20Steps) {
  const Layout& l = GetParam();
  const TrainRun host = run_train(l.ranks, plus(plus(args(), l.flags), {"--device", "host"}));
  ASSERT_TRUE(host.ok()) << host.describe();
  ASSERT_EQ(host.loss.size(), 20u) << host.describe();
  const TrainRun dev = run_train(l.ranks, plus(plus(args(), l.flags), {"--device", "emulated"}), 90,
                                 {{"STRATA_EMULATED_DELAY_US", "50"}});
  ASSERT_TRUE(dev.ok()) << dev.describe();
  EXPECT_NE(dev.proc.out.find("device emulated (emulated), fp32"), std::string::npos) << dev.describe();
  ASSERT_EQ(dev.loss.size(), 20u) << dev.describe();
  double worst = 0;
  for (const auto& [step, loss] : dev.loss) {
    const double d = rel_diff(loss, host.loss.at(step));
    worst = std::max(worst, d);
    EXPECT_LE(d, train_test::kLossRel) << "step " << step << ": " << loss << " vs host " << host.loss.at(step);
  }
  ASSERT_EQ(dev.val_loss.size(), host.val_loss.size()) << dev.describe();
  for (const auto& [step, loss] : dev.val_loss)
    EXPECT_LE(rel_diff(loss, host.val_loss.at(step)), train_test::kLossRel) << "validation at step " << step;
  // The emulated backend computes what the host computes in the same order, and a sum of
  // two ranks' values does not depend on the order: every rank ends with the host's
  // parameters bit for bit (a stricter check than the losses, which Adam's invariance to
  // the gradients' scale and clipping can hide a wrong factor from).
  std::vector<std::string> a = host.checksums, b = dev.checksums;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b) << "the final parameters differ from the host's";
  std::cout << l.name << " on the emulated device vs the host, 20 steps: worst relative loss difference " << worst
            << "; final parameters of the " << l.ranks << " ranks " << (a == b ? "bit-identical" : "differ") << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DeviceRanks,
    testing::Values(Layout{"tp2", 2, {"--tp", "2"}},
                    Layout{"tp2_sp", 2, {"--tp", "2", "--sequence-parallel"}},
                    Layout{"pp2_1f1b", 2, {"--pp", "2", "--microbatches", "4", "--schedule", "1f1b"}},
                    Layout{"pp2_interleaved", 2,
                           {"--pp", "2", "--microbatches", "4", "--schedule", "interleaved", "--virtual-stages", "2"}},
                    Layout{"dp2", 2, {"--dp", "2"}},
                    Layout{"dp2_zero1", 2, {"--dp", "2", "--zero", "1"}},
                    Layout{"dp2_zero2", 2, {"--dp", "2", "--zero", "2"}},
                    // ZeRO-3's gathers on a stream of their own: a layer computed before its
                    // gather landed, or a gather into a buffer still being read, shows here.
                    Layout{"dp2_zero3", 2, {"--dp", "2", "--zero", "3"}},
                    Layout{"dp2_zero3_prefetch2_recompute", 2,
                           {"--dp", "2", "--zero", "3", "--prefetch", "2", "--recompute", "block"}},
                    Layout{"dp2_grad_bf16", 2, {"--dp", "2", "--grad-dtype", "bf16"}},
                    Layout{"dp2_zero2_grad_bf16", 2, {"--dp", "2", "--zero", "2", "--grad-dtype", "bf16"}},
                    Layout{"diloco_2_islands", 2, {"--dp", "2", "--diloco-h", "5", "--islands", "2"}},
                    Layout{"diloco_streaming", 2,
                           {"--dp", "2", "--diloco-h", "4", "--islands", "2", "--fragments", "2", "--overlap", "1",
                            "--mix", "0.5"}}),
    [](const testing::TestParamInfo<Layout>& i) { return i.param.name; });

}  // namespace
