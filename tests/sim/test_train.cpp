// strata-sim --train: each kind of group's time is its calls per step (as
// training/traffic.cpp's formula counts them) times one call on every such group at once.
#include <gtest/gtest.h>

#include "train.hpp"

namespace strata::sim {
namespace {

const CommLine& line(const StageComm& s, const std::string& what) {
  for (const CommLine& l : s.lines)
    if (l.what == what) return l;
  throw std::logic_error("no line " + what);
}

std::vector<std::string> flags(std::vector<std::string> f) {
  f.insert(f.begin(), "strata-train");
  return f;
}

// Data parallel alone, zero 0, one bucket: one all-reduce of the model's parameters.
TEST(Train, DataParallelIsOneAllReducePerBucket) {
  const Model m(parse_cluster("link_model cluster\nlevel node size 4 bandwidth 10GB/s latency 5us\n", "t"));
  const TrainPrediction p = predict_training(
      m, flags({"--dp", "4", "--layers", "2", "--dim", "64", "--heads", "4", "--ctx", "16", "--batch", "8", "--bucket-mb", "1000"}));
  ASSERT_EQ(p.stages.size(), 1u);
  const CommLine& dp = line(p.stages[0], "data parallel");
  EXPECT_EQ(dp.calls, 1);
  // Ψ = wte + wpe + per layer (4 C^2 + 4C attention, 8 C^2 + 5C MLP, 4C LayerNorms) + 2C.
  const size_t C = 64, psi = 256 * C + 16 * C + 2 * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_EQ(dp.bytes, 4.0 * psi + 4) << "training/traffic.cpp: the parameters and the loss";
  const SimCall call{Collective::all_reduce, psi, DataType::float32, ReduceOp::sum, 0, false};
  const double one = simulate(m, call, std::nullopt, {0, 1}, false).replay.slowest_s;
  EXPECT_DOUBLE_EQ(dp.seconds, one);
}

// Tensor parallel: M (4L + e + h) all-reduces of N C floats per step, and the softmax's 3N
// floats on the head's stage; the groups are runs of ranks inside a node.
TEST(Train, TensorParallelCallsFollowTheFormula) {
  const Model m(parse_cluster("level node size 4 bandwidth 10GB/s latency 5us\nlevel net size 2 bandwidth 1GB/s latency 20us\n", "t"));
  const TrainPrediction p = predict_training(
      m, flags({"--tp", "4", "--dp", "2", "--layers", "3", "--dim", "64", "--heads", "4", "--ctx", "16", "--batch", "8",
                "--microbatches", "2"}));
  EXPECT_NE(p.header[1].find("groups: tp inside one node"), std::string::npos) << p.header[1];
  const CommLine& tp = line(p.stages[0], "tensor parallel");
  const double M = 2, L = 3, C = 64;
  EXPECT_NEAR(tp.calls, M * (4 * L + 2) + M * 3 / C, 1e-9);
  const double N = 8 / 2 / 2 * 16;  // rows per microbatch: batch / dp / microbatches * ctx
  const SimCall call{Collective::all_reduce, static_cast<size_t>(N * C), DataType::float32, ReduceOp::sum, 0, false};
  Cluster node = m.cluster;
  node.levels.pop_back();  // one tp group alone: the same as all of them at once, none shares a link
  const Model one_node(std::move(node));
  EXPECT_NEAR(tp.seconds, tp.calls * simulate(one_node, call, std::nullopt, {0, 1}, false).replay.slowest_s, 1e-12);
}

TEST(Train, PipelineStagesAndDilocoHaveTheirLines) {
  const Model m(parse_cluster("level node size 2 bandwidth 10GB/s latency 5us\nlevel net size 4 bandwidth 1GB/s latency 20us\n", "t"));
  const TrainPrediction pp = predict_training(
      m, flags({"--pp", "2", "--dp", "4", "--layers", "4", "--dim", "64", "--heads", "4", "--ctx", "16", "--batch", "8"}));
  ASSERT_EQ(pp.stages.size(), 2u);
  EXPECT_GT(line(pp.stages[0], "pipeline").seconds, 0);
  EXPECT_GT(line(pp.stages[1], "tied embedding").seconds, 0);
  const TrainPrediction dl = predict_training(
      m, flags({"--dp", "8", "--layers", "4", "--dim", "64", "--heads", "4", "--ctx", "16", "--batch", "8",
                "--diloco-h", "50", "--islands", "2", "--fragments", "2"}));
  const CommLine& outer = line(dl.stages[0], "outer sync");
  EXPECT_DOUBLE_EQ(outer.calls, 3.0 * 2 / 50) << "per fragment: all_to_all and all_gather across, all_gather inside";
  EXPECT_GT(outer.seconds, 0);
}

}  // namespace
}  // namespace strata::sim
