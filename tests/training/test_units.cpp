// Unit tests of the trainer's parts: parameter layout and ZeRO sharding, the data loader,
// the checkpoint file, the learning-rate schedule, and the three gradient modes in one
// process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "data.hpp"
#include "errors.hpp"
#include "grad_sync.hpp"
#include "group.hpp"
#include "layout.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "sharded_params.hpp"
#include "train_proc.hpp"
#include "weights.hpp"

namespace st = strata::train;

namespace {

const st::ModelConfig kOdd{256, 32, 2, 3, 27};  // odd sizes: buckets need padding

TEST(Layout, ShardsCoverEveryParameterExactlyOnce) {
  const size_t C = kOdd.dim, L = kOdd.layers;
  const size_t psi = 12 * L * C * C + 13 * L * C + (kOdd.vocab + kOdd.ctx) * C + 2 * C;
  for (int shards = 1; shards <= 5; ++shards) {
    for (size_t bucket : {size_t{1}, size_t{1000}, size_t{5000}, size_t{1} << 30}) {
      SCOPED_TRACE("shards " + std::to_string(shards) + " bucket " + std::to_string(bucket));
      st::ParamLayout l(kOdd, shards, bucket);
      ASSERT_EQ(l.num_params(), psi);
      ASSERT_EQ(l.padded_size() % shards, 0u);
      // Which flat positions hold a real parameter.
      std::vector<int> real(l.padded_size(), 0);
      size_t expect_off = 0;
      for (const auto& b : l.buckets()) {
        EXPECT_EQ(b.offset, expect_off);
        EXPECT_EQ(b.padded % shards, 0u);
        EXPECT_LT(b.padded - b.real, static_cast<size_t>(shards));
        size_t in = 0;
        for (int id = b.first_tensor; id < b.end_tensor; ++id) {
          const auto& t = l.tensor(id);
          EXPECT_EQ(t.offset, b.offset + in);
          for (size_t i = 0; i < t.size; ++i) real[t.offset + i] = 1;
          in += t.size;
        }
        EXPECT_EQ(in, b.real);
        expect_off += b.padded;
      }
      std::vector<int> owned(l.padded_size(), 0);
      for (int r = 0; r < shards; ++r) {
        std::vector<int> state_used(l.shard_size(), 0);
        for (const auto& s : l.shard_segments(r, true)) {
          ASSERT_LE(s.state + s.len, l.shard_size());
          EXPECT_EQ(s.grad, s.state);
          for (size_t i = 0; i < s.len; ++i) {
            owned[s.param + i]++;
            state_used[s.state + i]++;
          }
        }
        for (int u : state_used) EXPECT_LE(u, 1);
      }
      for (size_t i = 0; i < owned.size(); ++i) ASSERT_EQ(owned[i], real[i]) << "flat " << i;
    }
  }
}

TEST(Layout, CanonicalOrderRoundTrips) {
  st::ParamLayout l(kOdd, 4, 3000);
  std::vector<float> canon(l.num_params()), flat(l.padded_size()), back(l.num_params());
  for (size_t i = 0; i < canon.size(); ++i) canon[i] = static_cast<float>(i);
  st::canonical_to_flat(l, canon.data(), flat.data());
  st::flat_to_canonical(l, flat.data(), back.data());
  EXPECT_EQ(canon, back);
  double padding_sum = 0;
  for (float f : flat) padding_sum += f;
  double canon_sum = 0;
  for (float f : canon) canon_sum += f;
  EXPECT_EQ(padding_sum, canon_sum) << "padding must be zero";
}

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = train_test::make_temp_dir("data") + "/text.txt";
    std::string text;
    for (int i = 0; i < 5000; ++i) text.push_back(static_cast<char>('a' + (i * 7919) % 26));
    train_test::write_file(path_, text);
  }
  void TearDown() override { train_test::remove_tree(path_.substr(0, path_.rfind('/'))); }
  std::string path_;
};

TEST_F(DataTest, ValidationIsTheLastTenPercent) {
  st::TokenData d = st::TokenData::load(path_, "", 16, 256);
  EXPECT_EQ(d.size(), 5000u);
  EXPECT_EQ(d.val_size(), 500u);
  EXPECT_EQ(d.train_size(), 4500u);
  EXPECT_EQ(d.val(), d.train() + 4500);
}

TEST_F(DataTest, RankSlicesFormTheGlobalBatch) {
  const int T = 16, batch = 8;
  st::TokenData d = st::TokenData::load(path_, "", T, 256);
  st::BatchSampler whole(42);
  std::vector<int> in(batch * T), tg(batch * T);
  std::vector<st::BatchSampler> ranks(4, st::BatchSampler(42));
  for (int step = 0; step < 5; ++step) {
    whole.next(d, batch, T, 0, 1, in.data(), tg.data());
    for (int t = 0; t + 1 < batch * T; ++t) {
      if ((t + 1) % T) {
        EXPECT_EQ(tg[t], in[t + 1]);  // targets are the inputs shifted by one
      }
    }
    for (int r = 0; r < 4; ++r) {
      std::vector<int> rin(batch / 4 * T), rtg(batch / 4 * T);
      ranks[r].next(d, batch, T, r, 4, rin.data(), rtg.data());
      EXPECT_TRUE(std::equal(rin.begin(), rin.end(), in.begin() + r * rin.size())) << "rank " << r;
      EXPECT_TRUE(std::equal(rtg.begin(), rtg.end(), tg.begin() + r * rtg.size())) << "rank " << r;
    }
  }
}

TEST_F(DataTest, RestoredSamplerContinuesTheSameStream) {
  const int T = 16, batch = 4;
  st::TokenData d = st::TokenData::load(path_, "", T, 256);
  st::BatchSampler a(7);
  std::vector<int> in(batch * T), tg(batch * T), in2(batch * T);
  for (int i = 0; i < 3; ++i) a.next(d, batch, T, 0, 1, in.data(), tg.data());
  st::BatchSampler b(123);
  b.restore(a.rng().state(), a.batches_drawn());
  a.next(d, batch, T, 0, 1, in.data(), tg.data());
  b.next(d, batch, T, 0, 1, in2.data(), tg.data());
  EXPECT_EQ(in, in2);
  EXPECT_EQ(b.batches_drawn(), 4u);
}

TEST_F(DataTest, TooShortForTheContext) {
  EXPECT_THROW(st::TokenData::load(path_, "", 500, 256), st::TrainError);  // validation has 500 bytes
  EXPECT_NO_THROW(st::TokenData::load(path_, "", 499, 256));
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = train_test::make_temp_dir("ckpt"); }
  void TearDown() override { train_test::remove_tree(dir_); }
  void write(float base) {
    st::CheckpointWriter w(dir_);
    std::vector<float> x(30);
    for (size_t i = 0; i < x.size(); ++i) x[i] = base + i;
    w.append(x.data(), 10);
    w.append(x.data() + 10, 20);
    st::CheckpointHeader h{};
    h.layers = 1;
    h.step = 5;
    h.num_params = 10;
    w.commit(h);
  }
  std::string dir_;
};

TEST_F(CheckpointTest, RoundTrip) {
  write(1.0f);
  st::CheckpointReader r(dir_);
  EXPECT_EQ(r.header().step, 5u);
  float v[3];
  r.read(st::Section::adam_m, 2, 3, v);
  EXPECT_EQ(v[0], 13.0f);
  EXPECT_EQ(v[2], 15.0f);
}

TEST_F(CheckpointTest, EveryFlippedByteIsDetected) {
  write(1.0f);
  std::string path = dir_ + "/checkpoint.bin";
  const std::string good = train_test::read_file(path);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    train_test::write_file(path, bad);
    EXPECT_THROW(st::CheckpointReader r(dir_), st::TrainError) << "byte " << i;
  }
  train_test::write_file(path, good);
  EXPECT_NO_THROW(st::CheckpointReader r(dir_));
}

// A parameter count of 2^62 + 10 makes 3 * count * 4 wrap around to the payload of 10
// parameters; with both checksums right such a header was accepted (tests/fuzz found it,
// corpus/checkpoint/crash-num-params-wraps).
TEST_F(CheckpointTest, AParameterCountWhoseSizeWrapsAroundIsRefused) {
  write(1.0f);
  std::string path = dir_ + "/checkpoint.bin";
  std::string bytes = train_test::read_file(path);
  st::CheckpointHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.num_params += uint64_t{1} << 62;
  h.header_checksum = st::fnv1a(&h, offsetof(st::CheckpointHeader, header_checksum));
  std::memcpy(bytes.data(), &h, sizeof h);
  train_test::write_file(path, bytes);
  try {
    st::CheckpointReader r(dir_);
    ADD_FAILURE() << "accepted a parameter count of " << r.header().num_params;
  } catch (const st::TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter count 4611686018427387914 is impossible"), std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTest, AnUnfinishedWriteLeavesThePreviousCheckpoint) {
  write(1.0f);
  const auto before = train_test::snapshot(dir_);
  {
    st::CheckpointWriter w(dir_);  // as if the process died before commit()
    std::vector<float> x(30, 9.0f);
    w.append(x.data(), 30);
  }
  EXPECT_TRUE(train_test::snapshot(dir_) == before);
  st::CheckpointReader r(dir_);
  float v;
  r.read(st::Section::params, 0, 1, &v);
  EXPECT_EQ(v, 1.0f);
  write(2.0f);  // a completed write replaces it
  st::CheckpointReader r2(dir_);
  r2.read(st::Section::params, 0, 1, &v);
  EXPECT_EQ(v, 2.0f);
}

TEST(Schedule, WarmupThenCosineToTenPercent) {
  st::LrSchedule s{1.0f, 10, 110, 0.1f};
  EXPECT_FLOAT_EQ(s.at(1), 0.1f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(s.at(110), 0.1f);
  EXPECT_FLOAT_EQ(s.at(500), 0.1f);
  for (int i = 11; i < 110; ++i) EXPECT_LE(s.at(i + 1), s.at(i));
  EXPECT_FLOAT_EQ(st::clip_scale(4.0, 1.0f), 0.25f);
  EXPECT_FLOAT_EQ(st::clip_scale(0.5, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(st::clip_scale(4.0, 0.0f), 1.0f);
}

// In one process the four modes do the same arithmetic, so one optimizer step from the
// same state must give bit-identical parameters (ZeRO-3's in its own buffer order: its
// buckets are whole layer groups); zero 2 and 3 must get there without ever staging every
// bucket at once, and zero 3 gathering each group when the plan says.
TEST(GradModes, AgreeInOneProcess) {
  const int B = 2, T = 32;
  std::vector<int> in(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) {
    in[i] = (i * 31) % 256;
    tg[i] = (i * 17 + 5) % 256;
  }
  std::vector<float> result[4];
  int staging_peak = 0, buckets = 0;
  uint64_t gathers = 0;
  for (int zero = 0; zero <= 3; ++zero) {
    st::ParamLayout l(kOdd, 1, 1500, zero == 3);
    st::Group g;
    std::vector<float> params(l.padded_size());
    st::init_params(l, params.data(), 3);
    st::GradSync sync(g, l, zero, st::cpu_kernels(), 2);
    st::Group one;
    st::StepClock clock;
    st::TensorParallel tp(one, false, clock);
    st::FlatWeights flat(l, params.data());
    st::ShardedParams sharded(g, l, params.data(), st::cpu_kernels(), 1, clock);  // one shard: the flat buffer
    st::Weights& w = zero == 3 ? static_cast<st::Weights&>(sharded) : flat;
    const st::Chunk& chunk = l.partition().chunks[0];
    st::Gpt model(l, chunk, w, st::cpu_kernels(), tp, B);
    auto acts = model.make_activations();
    st::AdamW opt(st::AdamWConfig{}, sync.state_size(), st::cpu_kernels());
    for (int step = 1; step <= 2; ++step) {
      st::WeightUses uses = st::weight_uses(kOdd, chunk, true), back = st::weight_uses(kOdd, chunk, false);
      uses.insert(uses.end(), back.begin(), back.end());
      sharded.plan(uses);
      sync.begin_step();
      model.forward(*acts, in.data(), tg.data(), B, T);
      model.backward(*acts, sync, 1.0f);
      sync.finish();
      opt.step(st::cpu_kernels(), sync.segments(), params.data(), sync.grads(), step, 1e-3f,
               st::clip_scale(sync.global_norm(st::cpu_kernels()), 1.0f));
      sync.gather_params(params.data());
    }
    result[zero].resize(l.num_params());
    st::flat_to_canonical(l, params.data(), result[zero].data());
    if (zero >= 2) {
      staging_peak = std::max(staging_peak, sync.staging_peak());
      buckets = static_cast<int>(l.buckets().size());
    }
    if (zero == 3) gathers = sharded.gathers();
  }
  EXPECT_EQ(result[0], result[1]);
  EXPECT_EQ(result[0], result[2]);
  EXPECT_EQ(result[0], result[3]);
  EXPECT_LT(staging_peak, buckets) << "zero 2 or 3 staged every bucket at once";
  // Per step: forward gathers the embeddings, 2 blocks and the head's 2 groups; backward the
  // 2 blocks again (the head's stay from its forward, and the embedding's backward reads none).
  EXPECT_EQ(gathers, 2u * (1 + 2 + 2 + 2));
  std::cout << "zero 2/3: at most " << staging_peak << " buckets staged at once; zero 3: " << gathers
            << " group gathers in 2 steps\n";
}

// ZeRO-3's layout: no bucket holds two layer groups, and each group's span is exactly
// the buckets of its tensors, for any bucket size, rank count and pipeline stage.
TEST(Layout, GroupBucketsHoldOneLayerGroupEach) {
  for (int shards : {1, 2, 3}) {
    for (size_t bucket : {size_t{1}, size_t{3000}, size_t{1} << 30}) {
      for (int stage = 0; stage < 2; ++stage) {
        SCOPED_TRACE("shards " + std::to_string(shards) + " bucket " + std::to_string(bucket) + " stage " +
                     std::to_string(stage));
        const st::ModelPartition part{1, 0, {{stage, stage + 1, stage == 0, stage == 1}}};
        st::ParamLayout l(kOdd, part, shards, bucket, true);
        size_t covered = 0;
        for (int g = 0; g < st::layer_groups(kOdd); ++g) {
          const st::GroupSpan& span = l.group_span(g);
          covered += span.padded;
          for (int b = span.first_bucket; b < span.end_bucket; ++b)
            for (int t = l.buckets()[b].first_tensor; t < l.buckets()[b].end_tensor; ++t) {
              if (l.holds(t)) {
                EXPECT_EQ(st::layer_group(kOdd, t), g) << l.tensor(t).name;
              }
            }
        }
        for (int t = 0; t < st::tensor_count(kOdd); ++t)
          if (l.holds(t)) {
            const st::GroupSpan& span = l.group_span(st::layer_group(kOdd, t));
            EXPECT_GE(l.tensor(t).offset, span.offset);
            EXPECT_LE(l.tensor(t).offset + l.tensor(t).size, span.offset + span.padded);
          }
        EXPECT_EQ(covered, l.padded_size());
      }
    }
  }
}

// The gathers a plan issues and lets go, against a walk-through by hand: a forward of the
// embeddings (0), blocks 1 and 2 and the head (3 with the tied 0), then its backward.
TEST(ShardedParams, PlanGathersAheadAndKeepsOnlyWhatTheNextSetUses) {
  const st::WeightUses uses = {{0}, {1}, {2}, {3, 0}, {3, 0}, {2}, {1}};
  std::vector<char> none(4, 0);
  EXPECT_EQ(st::ShardedParams::to_gather(uses, 0, 1, none), (std::vector<int>{0, 1}));
  EXPECT_EQ(st::ShardedParams::to_gather(uses, 2, 2, none), (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(st::ShardedParams::to_gather(uses, 0, 0, none), (std::vector<int>{0}));
  EXPECT_EQ(st::ShardedParams::to_gather(uses, 6, 3, none), (std::vector<int>{1}));  // the plan's end
  std::vector<char> some = {1, 0, 1, 0};
  EXPECT_EQ(st::ShardedParams::to_gather(uses, 2, 1, some), (std::vector<int>{3}));
  EXPECT_EQ(st::ShardedParams::to_release(uses, 0), (std::vector<int>{0}));  // the head's 0 comes later, not next
  EXPECT_TRUE(st::ShardedParams::to_release(uses, 3).empty());  // the head's backward follows at once
  EXPECT_EQ(st::ShardedParams::to_release(uses, 4), (std::vector<int>{3, 0}));
  EXPECT_EQ(st::ShardedParams::to_release(uses, 6), (std::vector<int>{1}));
  // At once: the set open and `ahead` sets more, by the groups' sizes: blocks 1 and 2 of
  // 100 floats, the embeddings 30, the head 5 (its pair makes 3 groups at ahead 1).
  const std::vector<size_t> floats = {30, 100, 100, 5};
  using Need = std::map<size_t, int>;
  EXPECT_EQ(st::ShardedParams::buffers_needed(uses, 0, floats), (Need{{5, 1}, {30, 1}, {100, 1}}));
  EXPECT_EQ(st::ShardedParams::buffers_needed(uses, 1, floats), (Need{{5, 1}, {30, 1}, {100, 2}}));
  EXPECT_EQ(st::ShardedParams::buffers_needed(uses, 2, floats), (Need{{5, 1}, {30, 1}, {100, 2}}));
}

// One rank's ZeRO-3 parameters (its shard is the whole buffer), prefetching one set ahead.
class OneRankSharded : public ::testing::Test {
 protected:
  OneRankSharded() { st::init_params(l, params.data(), 3); }
  st::ParamLayout l{kOdd, 1, 1500, true};
  std::vector<float> params = std::vector<float>(l.padded_size());
  st::Group one;
  st::StepClock clock;
  st::ShardedParams w{one, l, params.data(), st::cpu_kernels(), 1, clock};
};

// A pass a failure interrupted leaves a group gathered ahead; the next plan gathers it
// again (from the shard as it is now), not the stale copy.
TEST_F(OneRankSharded, ANewPlanStartsFromNothingGathered) {
  const int qkv = st::tensor_layer(0, st::kQkvW);  // group 1
  w.plan({{0}, {1}});
  w.open({0});  // gathers group 1 ahead
  w.close();
  params[l.tensor(qkv).offset] = 42.0f;  // the optimizer's step
  w.plan({{1}});
  w.open({1});
  EXPECT_EQ(w.tensor(qkv)[0], 42.0f);
  w.close();
}

// Opening out of the plan, or reading a group that is not open, is a bug caught at once.
TEST_F(OneRankSharded, RefusesWhatThePlanDoesNotSay) {
  w.plan({{0}, {1}});
  EXPECT_THROW(w.open({1}), std::logic_error);
  w.open({0});
  EXPECT_EQ(w.tensor(st::tensor_wpe())[3], params[l.tensor(st::tensor_wpe()).offset + 3]);
  EXPECT_THROW(w.tensor(st::tensor_layer(0, st::kQkvW)), std::logic_error);
  EXPECT_THROW(w.plan({{0}}), std::logic_error);  // a pass is open
  w.close();
}

// --grad-dtype bf16 in one process: the reduction is the identity, so each gradient the
// optimizer sees is the fp32 gradient rounded once to bfloat16 (to nearest, ties to even,
// computed here from the bits), in every ZeRO mode.
TEST(GradModes, Bf16ReductionRoundsEachGradientOnce) {
  auto round_bf16 = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&x, &u, sizeof x);
    return x;
  };
  const int B = 2, T = 32;
  std::vector<int> in(B * T), tg(B * T);
  for (int i = 0; i < B * T; ++i) {
    in[i] = (i * 13) % 256;
    tg[i] = (i * 7 + 1) % 256;
  }
  for (int zero = 0; zero <= 2; ++zero) {
    st::ParamLayout l(kOdd, 1, 1500);
    std::vector<float> params(l.padded_size());
    st::init_params(l, params.data(), 5);
    std::vector<float> grads[2];
    for (bool bf16 : {false, true}) {
      st::Group g, one;
      st::GradSync sync(g, l, zero, st::cpu_kernels(), 2);
      sync.reduce_in_bf16(bf16);
      st::StepClock clock;
      st::TensorParallel tp(one, false, clock);
      st::FlatWeights flat(l, params.data());
      st::Gpt model(l, l.partition().chunks[0], flat, st::cpu_kernels(), tp, B);
      auto acts = model.make_activations();
      sync.begin_step();
      model.forward(*acts, in.data(), tg.data(), B, T);
      model.backward(*acts, sync, 1.0f);
      sync.finish();
      for (const st::Segment& s : sync.segments())
        grads[bf16].insert(grads[bf16].end(), sync.grads() + s.grad, sync.grads() + s.grad + s.len);
    }
    ASSERT_EQ(grads[0].size(), grads[1].size());
    size_t changed = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_EQ(grads[1][i], round_bf16(grads[0][i])) << "zero " << zero << ", gradient " << i;
      changed += grads[1][i] != grads[0][i];
    }
    EXPECT_GT(changed, grads[0].size() / 2) << "zero " << zero << ": bf16 left most gradients as they were";
  }
}

}  // namespace
