// Unit tests of model parallelism's parts, without processes: the rank grid on a
// hierarchy, the pipeline schedules (replayed on a simulated pipeline against the bubble
// formula), the split of layers over stages, and the tensor-parallel cut of each tensor
// against the serial initialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "errors.hpp"
#include "layout.hpp"
#include "model.hpp"
#include "pipeline_schedule.hpp"
#include "rank_grid.hpp"

namespace st = strata::train;

namespace {

st::GridShape shape(int tp, int pp, int dp, const std::string& order = "tp,pp,dp") {
  st::GridShape s;
  s.size[st::kTp] = tp;
  s.size[st::kPp] = pp;
  s.size[st::kDp] = dp;
  s.order = st::parse_grid_order(order);
  return s;
}

std::vector<int> v(std::initializer_list<int> x) { return x; }

TEST(RankGrid, EveryCoordinateOnceAndGroupsAlongOneDimension) {
  for (const std::string order : {"tp,pp,dp", "dp,tp,pp", "pp,dp,tp"}) {
    st::RankGrid g(shape(2, 3, 2, order), {});
    std::set<std::vector<int>> seen;
    for (int r = 0; r < 12; ++r) {
      const int t = g.coord(r, st::kTp), p = g.coord(r, st::kPp), d = g.coord(r, st::kDp);
      EXPECT_TRUE(seen.insert({t, p, d}).second) << order;
      EXPECT_EQ(g.rank_at(t, p, d), r);
      for (st::Dim dim : {st::kTp, st::kPp, st::kDp}) {
        std::vector<int> grp = g.group(dim, r);
        EXPECT_EQ(grp[g.coord(r, dim)], r);
        for (int q : grp)
          for (st::Dim other : {st::kTp, st::kPp, st::kDp}) {
            if (other == dim) continue;
            EXPECT_EQ(g.coord(q, other), g.coord(r, other));
          }
      }
    }
  }
}

TEST(RankGrid, TensorParallelInsideNodesEvenWhenNodesAreNotRunsOfRanks) {
  // mpirun --map-by node places rank r on node r % 2.
  st::RankGrid g(shape(2, 1, 2), {{"node", {0, 1, 0, 1}}});
  EXPECT_EQ(g.group(st::kTp, 0), v({0, 2}));
  EXPECT_EQ(g.group(st::kTp, 1), v({1, 3}));
  EXPECT_EQ(g.placement(g.group(st::kTp, 0)), "inside one node");
  EXPECT_EQ(g.placement(g.group(st::kDp, 0)), "across nodes");
}

TEST(RankGrid, MegatronOrderOnNodesAndIslands) {
  // 8 ranks, nodes of 2, islands of 2 nodes.
  st::RankGrid g(shape(2, 2, 2), {{"node", {0, 0, 1, 1, 2, 2, 3, 3}}, {"island", {0, 0, 0, 0, 1, 1, 1, 1}}});
  EXPECT_EQ(g.group(st::kTp, 0), v({0, 1}));
  EXPECT_EQ(g.group(st::kPp, 0), v({0, 2}));
  EXPECT_EQ(g.group(st::kDp, 0), v({0, 4}));
  EXPECT_EQ(g.placement(g.group(st::kTp, 0)), "inside one node");
  EXPECT_EQ(g.placement(g.group(st::kPp, 0)), "across nodes, inside one island");
  EXPECT_EQ(g.placement(g.group(st::kDp, 0)), "across islands");
  // Tensor parallelism deliberately across the slow links.
  st::RankGrid bad(shape(2, 2, 2, "dp,pp,tp"), {{"node", {0, 0, 1, 1, 2, 2, 3, 3}}, {"island", {0, 0, 0, 0, 1, 1, 1, 1}}});
  EXPECT_EQ(bad.group(st::kTp, 0), v({0, 4}));
  EXPECT_EQ(bad.placement(bad.group(st::kTp, 0)), "across islands");
  const std::string text = g.describe();
  EXPECT_NE(text.find("tp groups of 2: [0,1] [2,3] [4,5] [6,7] -- inside one node"), std::string::npos) << text;
}

TEST(RankGrid, OrderParsing) {
  EXPECT_EQ(st::grid_order_text(st::parse_grid_order("dp,tp,pp")), "dp,tp,pp");
  for (const char* bad : {"tp,pp", "tp,pp,dp,tp", "tp,tp,dp", "tp,pp,xx", "tp,pp,dp,", ""})
    EXPECT_THROW(st::parse_grid_order(bad), st::TrainError) << bad;
}

// ---------------------------------------------------------------------------------------
TEST(StageChunks, EveryLayerOnceEvenAsPossible) {
  for (int layers = 1; layers <= 9; ++layers)
    for (int P = 1; P <= 4; ++P)
      for (int V = 1; V <= 2; ++V) {
        if (layers < P * V) continue;
        std::vector<int> owner(layers, 0);
        int embedding = 0, head = 0, smallest = layers, largest = 0;
        for (int p = 0; p < P; ++p) {
          std::vector<st::Chunk> cs = st::stage_chunks(layers, P, V, p);
          ASSERT_EQ(static_cast<int>(cs.size()), V);
          for (int c = 0; c < V; ++c) {
            const st::Chunk& ch = cs[c];
            smallest = std::min(smallest, ch.end_layer - ch.first_layer);
            largest = std::max(largest, ch.end_layer - ch.first_layer);
            for (int l = ch.first_layer; l < ch.end_layer; ++l) owner[l]++;
            if (ch.embedding) {
              embedding++;
              EXPECT_EQ(ch.first_layer, 0);
              EXPECT_TRUE(p == 0 && c == 0);
            }
            if (ch.head) {
              head++;
              EXPECT_EQ(ch.end_layer, layers);
              EXPECT_TRUE(p == P - 1 && c == V - 1);
            }
          }
        }
        EXPECT_EQ(owner, std::vector<int>(layers, 1));
        EXPECT_EQ(embedding, 1);
        EXPECT_EQ(head, 1);
        EXPECT_LE(largest - smallest, 1);
      }
  EXPECT_EQ(st::describe_stages(5, 2, 1), "stage 0: embedding, layers 0-2 | stage 1: layers 3-4, head");
  EXPECT_EQ(st::describe_stages(4, 2, 2), "stage 0: embedding, layers 0; layers 2 | stage 1: layers 1; layers 3, head");
}

// ---------------------------------------------------------------------------------------
// Replays the schedules of all stages on a model of the pipeline: an action starts when
// its stage is free and its input exists (the previous virtual stage's forward of the
// microbatch; the next one's backward, or its own forward on the last virtual stage). A
// chunk's forward takes tf, its backward tb. Fails on a deadlock.
struct Replay {
  double makespan = 0;
  std::vector<double> busy;  // per stage
  std::vector<int> peak_in_flight;
};
Replay replay(st::Schedule s, int P, int V, int M, double tf, double tb) {
  const int S = P * V;
  std::vector<std::vector<st::PipeAction>> plans;
  for (int p = 0; p < P; ++p) plans.push_back(st::pipeline_schedule(s, P, V, M, p));
  std::map<std::tuple<bool, int, int>, double> done;  // (forward, virtual stage, mb) -> time
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0);
  Replay r;
  r.busy.assign(P, 0);
  r.peak_in_flight.assign(P, 0);
  std::vector<int> in_flight(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int p = 0; p < P; ++p) {
      if (next[p] == plans[p].size()) continue;
      const st::PipeAction& a = plans[p][next[p]];
      const int vs = a.chunk * P + p;
      std::tuple<bool, int, int> need =
          a.forward ? std::make_tuple(true, vs - 1, a.microbatch)
                    : (vs == S - 1 ? std::make_tuple(true, vs, a.microbatch) : std::make_tuple(false, vs + 1, a.microbatch));
      const bool ready = a.forward && vs == 0 ? true : done.count(need) > 0;
      if (!ready) continue;
      const double start = std::max(free_at[p], a.forward && vs == 0 ? 0.0 : done[need]);
      const double t = (a.forward ? tf : tb) / V;
      free_at[p] = start + t;
      r.busy[p] += t;
      done[{a.forward, vs, a.microbatch}] = free_at[p];
      in_flight[p] += a.forward ? 1 : -1;
      r.peak_in_flight[p] = std::max(r.peak_in_flight[p], in_flight[p]);
      ++next[p];
      progress = true;
    }
  }
  for (int p = 0; p < P; ++p) {
    EXPECT_EQ(next[p], plans[p].size()) << "stage " << p << " stuck: the schedules deadlock";
    r.makespan = std::max(r.makespan, free_at[p]);
  }
  return r;
}

TEST(Schedules, EveryPassOnceInOrderWithoutDeadlockAndTheBubbleOfTheFormula) {
  for (st::Schedule s : {st::Schedule::gpipe, st::Schedule::one_f_one_b, st::Schedule::interleaved})
    for (int P : {2, 3, 4})
      for (int M : {1, 2, 4, 8, 16}) {
        const int V = s == st::Schedule::interleaved ? 2 : 1;
        if (s == st::Schedule::interleaved && M % P) continue;
        SCOPED_TRACE(std::string(st::schedule_name(s)) + " P " + std::to_string(P) + " M " + std::to_string(M));
        for (int p = 0; p < P; ++p) {
          std::map<std::pair<int, int>, int> f, b;  // (chunk, mb) -> position
          std::vector<st::PipeAction> plan = st::pipeline_schedule(s, P, V, M, p);
          for (size_t i = 0; i < plan.size(); ++i)
            (plan[i].forward ? f : b)[{plan[i].chunk, plan[i].microbatch}] = static_cast<int>(i);
          ASSERT_EQ(plan.size(), static_cast<size_t>(2 * M * V));
          ASSERT_EQ(f.size(), static_cast<size_t>(M * V));
          ASSERT_EQ(b.size(), static_cast<size_t>(M * V));
          for (auto& [key, pos] : f) EXPECT_LT(pos, b.at(key));
          EXPECT_EQ(st::pipeline_schedule(s, P, V, M, p, true).size(), static_cast<size_t>(M * V));
        }
        // Equal forward and backward times: the bubble is exactly the formula's.
        Replay r = replay(s, P, V, M, 1.0, 1.0);
        for (int p = 0; p < P; ++p) {
          const double idle = 1.0 - r.busy[p] / r.makespan;
          EXPECT_NEAR(idle, st::bubble_formula(s, P, V, M), 1e-9) << "stage " << p;
        }
        // Memory: GPipe holds every microbatch, 1F1B at most P - stage.
        for (int p = 0; p < P; ++p) {
          if (s == st::Schedule::gpipe) {
            EXPECT_EQ(r.peak_in_flight[p], M);
          } else if (s == st::Schedule::one_f_one_b) {
            EXPECT_EQ(r.peak_in_flight[p], std::min(M, P - p));
          }
        }
      }
}

// On every link the receiver takes messages in the order the sender sends them, which is
// what lets each one-way link be a communicator that matches in order.
TEST(Schedules, EveryLinkDeliversInTheOrderItIsRead) {
  for (st::Schedule s : {st::Schedule::gpipe, st::Schedule::one_f_one_b, st::Schedule::interleaved})
    for (int P : {2, 3, 4})
      for (int M : {4, 8, 12}) {
        const int V = s == st::Schedule::interleaved ? 2 : 1, S = P * V;
        if (s == st::Schedule::interleaved && M % P) continue;
        // [sender stage] -> (virtual stage sent from, mb) in order; likewise what is read.
        std::map<int, std::vector<std::pair<int, int>>> act_sent, act_read, grad_sent, grad_read;
        for (int p = 0; p < P; ++p)
          for (const st::PipeAction& a : st::pipeline_schedule(s, P, V, M, p)) {
            const int vs = a.chunk * P + p;
            if (a.forward && vs < S - 1) act_sent[p].push_back({vs, a.microbatch});
            if (a.forward && vs > 0) act_read[(p - 1 + P) % P].push_back({vs - 1, a.microbatch});
            if (!a.forward && vs > 0) grad_sent[p].push_back({vs, a.microbatch});
            if (!a.forward && vs < S - 1) grad_read[(p + 1) % P].push_back({vs + 1, a.microbatch});
          }
        EXPECT_EQ(act_sent, act_read) << st::schedule_name(s) << " P " << P << " M " << M;
        EXPECT_EQ(grad_sent, grad_read) << st::schedule_name(s) << " P " << P << " M " << M;
      }
}

// ---------------------------------------------------------------------------------------
// Initialisation parity: a tensor-parallel rank's piece of every tensor is the slice of
// the serial tensor that Megatron gives it, written here from the definitions: c_attn's
// q, k and v rows of heads [t H/T, (t+1) H/T), c_fc's rows and wte's vocabulary rows in
// T runs, the c_proj's columns in T runs, and everything else whole.
float serial_at(const st::ParamLayout& whole, const std::vector<float>& p, int id, int row, int col) {
  const st::TensorInfo& t = whole.tensor(id);
  const int cols = t.shape.size() > 1 ? t.shape[1] : 1;
  return p[t.offset + static_cast<size_t>(row) * cols + col];
}

TEST(TensorParallelInit, ShardIsTheSliceOfTheSerialTensor) {
  const st::ModelConfig cfg{256, 16, 3, 4, 32};
  const uint64_t seed = 1234;
  st::ParamLayout whole(cfg, 1, 1 << 20);
  std::vector<float> serial(whole.padded_size());
  st::init_params(whole, serial.data(), seed);
  for (int T : {2, 4}) {
    for (int t = 0; t < T; ++t) {
      st::ParamLayout piece(cfg, st::ModelPartition{T, t, {{0, cfg.layers, true, true}}}, 2, 3000);
      std::vector<float> mine(piece.padded_size());
      st::init_params(piece, mine.data(), seed);
      for (int id = 0; id < st::tensor_count(cfg); ++id) {
        const st::TensorInfo& info = piece.tensor(id);
        const int rows = info.shape[0], cols = info.shape.size() > 1 ? info.shape[1] : 1;
        const std::string& n = info.name;
        size_t k = 0, mismatches = 0;
        auto expect = [&](int row, int col) {
          mismatches += mine[info.offset + k++] != serial_at(whole, serial, id, row, col);
        };
        if (n.find("c_attn") != std::string::npos) {
          const int C = rows / 3, per = C / T;
          for (int block = 0; block < 3; ++block)
            for (int r = block * C + t * per; r < block * C + (t + 1) * per; ++r)
              for (int c = 0; c < cols; ++c) expect(r, c);
        } else if (n == "wte" || n.find("c_fc") != std::string::npos) {
          for (int r = t * rows / T; r < (t + 1) * rows / T; ++r)
            for (int c = 0; c < cols; ++c) expect(r, c);
        } else if (n.find("c_proj.weight") != std::string::npos) {
          for (int r = 0; r < rows; ++r)
            for (int c = t * cols / T; c < (t + 1) * cols / T; ++c) expect(r, c);
        } else {
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) expect(r, c);
        }
        EXPECT_EQ(k, info.size) << n;
        EXPECT_EQ(mismatches, 0u) << n << " on tensor-parallel rank " << t << " of " << T;
      }
    }
  }
}

// Every parameter of the model counts toward the gradient norm exactly once over the
// ranks of a tp x pp grid: pieces of cut tensors everywhere, replicated tensors on
// tensor-parallel rank 0, the tied embedding on the first stage only.
TEST(TensorParallelInit, NormCountsEveryParameterOnce) {
  const st::ModelConfig cfg{256, 16, 5, 4, 32};
  st::ParamLayout whole(cfg, 1, 1 << 20);
  for (int T : {1, 2, 4})
    for (int P : {1, 2, 3}) {
      size_t counted = 0;
      for (int t = 0; t < T; ++t)
        for (int p = 0; p < P; ++p) {
          st::ParamLayout l(cfg, st::ModelPartition{T, t, st::stage_chunks(cfg.layers, P, 1, p)}, 1, 1 << 20);
          for (const st::Segment& s : l.all_segments()) counted += s.counted ? s.len : 0;
        }
      EXPECT_EQ(counted, whole.num_params()) << "tp " << T << " pp " << P;
    }
}

}  // namespace
