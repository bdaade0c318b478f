// Trainer::save and Trainer::load: how this rank's (possibly sharded) state maps onto the
// canonical checkpoint file, one bucket at a time so that no rank ever holds more than its
// shard plus one bucket of the optimizer state.
#include <cstring>
#include <memory>

#include "errors.hpp"
#include "trainer.hpp"

namespace strata::train {

void Trainer::save(const std::string& dir) {
  const bool root = group_.rank() == 0;
  std::unique_ptr<CheckpointWriter> w;
  if (root) w = std::make_unique<CheckpointWriter>(dir);
  // Each bucket in turn: the parameters are whole on every rank; sharded moments are
  // gathered one bucket at a time so no rank ever holds all of them.
  std::vector<float> bucket(layout_.max_bucket());
  std::vector<float> canon;
  auto emit = [&](const Bucket& b, const float* full) {
    if (!root) return;
    canon.clear();
    for (int id = b.first_tensor; id < b.end_tensor; ++id) {
      const TensorInfo& t = layout_.tensor(id);
      const float* src = full + (t.offset - b.offset);
      canon.insert(canon.end(), src, src + t.size);
    }
    w->append(canon.data(), canon.size());
  };
  for (const Bucket& b : layout_.buckets()) emit(b, params_.data() + b.offset);
  for (std::vector<float>* state : {&opt_.m(), &opt_.v()}) {
    for (const Bucket& b : layout_.buckets()) {
      if (o_.zero == 0) {
        emit(b, state->data() + b.offset);
        continue;
      }
      size_t n = layout_.slice(b);
      std::memcpy(bucket.data() + group_.rank() * n, state->data() + b.shard_offset,
                  n * sizeof(float));
      group_.all_gather(bucket.data(), n).wait();
      emit(b, bucket.data());
    }
  }
  if (root) w->commit(checkpoint_header());
  // Nobody moves on (or exits) before the file is in place.
  group_.barrier();
}

CheckpointHeader Trainer::checkpoint_header() const {
  CheckpointHeader h{};
  h.vocab = o_.model.vocab;
  h.ctx = o_.model.ctx;
  h.layers = o_.model.layers;
  h.heads = o_.model.heads;
  h.dim = o_.model.dim;
  h.batch = o_.batch;
  h.seed = o_.seed;
  h.step = step_;
  std::memcpy(h.data_rng, sampler_.rng().state(), sizeof h.data_rng);
  h.batches_drawn = sampler_.batches_drawn();
  h.num_params = layout_.num_params();
  return h;
}

void check_checkpoint_matches(const CheckpointHeader& h, const Options& o) {
  const ModelConfig& m = o.model;
  auto field = [](const char* name, uint64_t ck, uint64_t here) {
    return std::string(name) + " " + std::to_string(ck) +
           (ck == here ? "" : " (here " + std::to_string(here) + ")");
  };
  if (h.vocab != static_cast<uint32_t>(m.vocab) || h.ctx != static_cast<uint32_t>(m.ctx) ||
      h.layers != static_cast<uint32_t>(m.layers) || h.heads != static_cast<uint32_t>(m.heads) ||
      h.dim != static_cast<uint32_t>(m.dim)) {
    throw TrainError(
        "checkpoint is for a different model: " + field("--layers", h.layers, m.layers) + ", " +
        field("--heads", h.heads, m.heads) + ", " + field("--dim", h.dim, m.dim) + ", " +
        field("--ctx", h.ctx, m.ctx) + ", vocab " + std::to_string(h.vocab));
  }
  if (h.step >= static_cast<uint64_t>(o.steps))
    throw TrainError("checkpoint is at step " + std::to_string(h.step) +
                     ", nothing left to do for --steps " + std::to_string(o.steps));
}

void Trainer::load(const CheckpointReader& r) {
  const CheckpointHeader& h = r.header();
  check_checkpoint_matches(h, o_);
  if (h.num_params != layout_.num_params()) throw TrainError("checkpoint parameter count differs");
  std::vector<float> bucket(layout_.max_bucket());
  auto read_bucket = [&](Section s, const Bucket& b) {
    std::fill(bucket.begin(), bucket.end(), 0.0f);
    for (int id = b.first_tensor; id < b.end_tensor; ++id) {
      const TensorInfo& t = layout_.tensor(id);
      r.read(s, canonical_offset_[id], t.size, bucket.data() + (t.offset - b.offset));
    }
  };
  for (const Bucket& b : layout_.buckets()) {
    read_bucket(Section::params, b);
    std::memcpy(params_.data() + b.offset, bucket.data(), b.padded * sizeof(float));
  }
  for (Section s : {Section::adam_m, Section::adam_v}) {
    std::vector<float>& state = s == Section::adam_m ? opt_.m() : opt_.v();
    for (const Bucket& b : layout_.buckets()) {
      read_bucket(s, b);
      if (o_.zero == 0) {
        std::memcpy(state.data() + b.offset, bucket.data(), b.padded * sizeof(float));
      } else {
        size_t n = layout_.slice(b);
        std::memcpy(state.data() + b.shard_offset, bucket.data() + group_.rank() * n,
                    n * sizeof(float));
      }
    }
  }
  step_ = static_cast<int>(h.step);
  sampler_.restore(h.data_rng, h.batches_drawn);
}

}  // namespace strata::train
