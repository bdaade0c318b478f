// Trainer::save and Trainer::load: how this rank's state -- its pipeline stage's tensors,
// its tensor-parallel piece of each, and under ZeRO its slices of the optimizer state --
// maps onto the canonical checkpoint file, which holds the whole model and so loads under
// any layout. Rank 0 writes one whole tensor at a time, assembled from the pieces the
// other ranks send it; no rank holds more than its own state plus one tensor.
#include <cstring>
#include <memory>

#include "errors.hpp"
#include "trainer.hpp"

namespace strata::train {
namespace {

// The segments of `t` among `segs` (which are in buffer order).
std::vector<Segment> of_tensor(const std::vector<Segment>& segs, const TensorInfo& t) {
  std::vector<Segment> out;
  for (const Segment& s : segs)
    if (s.param >= t.offset && s.param < t.offset + t.size) out.push_back(s);
  return out;
}

}  // namespace

std::vector<float> Trainer::host_copy(Section s) const {
  return (s == Section::params ? params_ : s == Section::adam_m ? opt_.m() : opt_.v()).to_host();
}

void Trainer::gather_whole(const float* src, bool sharded, const std::function<void(int, const float*)>& emit) {
  Group& world = groups_.world();
  const RankGrid& grid = groups_.grid();
  const bool root = world.rank() == 0;
  const int T = o_.tp, P = o_.pp, D = groups_.size(kDp);  // fewer than --dp after a shrink
  // What a data-parallel rank sends of its tensors: a parameter-shaped buffer from rank 0,
  // sharded moments from every rank (its slices). The state offset indexes `src` in every
  // case (for a parameter-shaped buffer it is the flat offset).
  auto sends = [&](const ParamLayout& l, int dp_rank) -> std::vector<Segment> {
    if (!sharded) return dp_rank == 0 ? l.all_segments() : std::vector<Segment>{};
    return l.shard_segments(dp_rank, false);
  };
  // Rank 0 knows every rank's layout, since layouts follow from the options alone.
  std::vector<std::unique_ptr<ParamLayout>> layouts;
  std::vector<std::vector<std::vector<Segment>>> segments;  // [tp * P + stage][dp rank]
  if (root) {
    for (int t = 0; t < T; ++t)
      for (int p = 0; p < P; ++p) {
        layouts.push_back(std::make_unique<ParamLayout>(layout_of(o_, t, p, D)));
        segments.emplace_back();
        for (int d = 0; d < D; ++d) segments.back().push_back(sends(*layouts.back(), d));
      }
  }
  const std::vector<Segment> mine = sends(layout_, groups_.coord(kDp));
  std::vector<strata::Request> pending;
  std::vector<float> whole, piece;
  // The stage that holds each tensor (the tied wte: the first, whose copy is the embedding).
  std::vector<int> owners(tensor_count(o_.model), -1);
  for (int p = P - 1; p >= 0; --p) {
    ParamLayout stage(o_.model, partition_of(o_, 0, p), 1, bucket_elems(o_));
    for (int id = 0; id < tensor_count(o_.model); ++id)
      if (stage.holds(id)) owners[id] = p;
  }
  for (int id = 0; id < tensor_count(o_.model); ++id) {
    const int owner = owners[id];
    const TensorInfo& info = layout_.tensor(id);
    if (root) whole.assign(info.full_size, 0.0f);
    for (int t = 0; t < T; ++t) {
      const ParamLayout* l = root ? layouts[t * P + owner].get() : nullptr;
      if (root) piece.assign(l->tensor(id).size, 0.0f);
      for (int d = 0; d < D; ++d) {
        const int sender = grid.rank_at(t, owner, d);
        if (sender == world.rank()) {
          for (const Segment& g : of_tensor(mine, info)) {
            if (root)
              std::memcpy(piece.data() + (g.param - info.offset), src + g.state, g.len * sizeof(float));
            else
              pending.push_back(world.send(src + g.state, g.len, 0));
          }
        } else if (root) {
          const TensorInfo& there = l->tensor(id);
          for (const Segment& g : of_tensor(segments[t * P + owner][d], there))
            world.recv(piece.data() + (g.param - there.offset), g.len, sender).wait();
        }
      }
      if (root)
        for (const ShardRun& run : shard_runs(l->tensor(id), T, t))
          std::memcpy(whole.data() + run.whole, piece.data() + run.local, run.len * sizeof(float));
    }
    if (root) emit(id, whole.data());
  }
  for (auto& r : pending) r.wait();
}

Trainer::Kept Trainer::keep() const {
  return {host_copy(Section::params), host_copy(Section::adam_m), host_copy(Section::adam_v), step_, sampler_};
}

void Trainer::restore(const Kept& k) {
  // In place: the model chunks and the outer sync hold pointers into these buffers.
  k_.upload(params_.data(), k.params.data(), params_.bytes());
  k_.upload(opt_.m().data(), k.m.data(), opt_.m().bytes());
  k_.upload(opt_.v().data(), k.v.data(), opt_.v().bytes());
  step_ = k.step;
  sampler_ = k.sampler;
}

void Trainer::save(const std::string& dir) {
  const bool root = groups_.world().rank() == 0;
  std::unique_ptr<CheckpointWriter> w;
  if (root) w = std::make_unique<CheckpointWriter>(dir);
  // The moments are sharded under ZeRO (each data-parallel rank holds its slices), the
  // parameters under ZeRO-3.
  for (Section s : {Section::params, Section::adam_m, Section::adam_v})
    gather_whole(host_copy(s).data(), s == Section::params ? sharded() : o_.zero > 0, [&](int id, const float* whole) {
      w->append(whole, layout_.tensor(id).full_size);
    });
  if (root) w->commit(checkpoint_header());
  // Nobody moves on (or exits) before the file is in place.
  groups_.world().barrier();
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
  h.num_params = layout_.model_params();  // the whole model, whatever this rank holds
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

Trainer::PieceOf Trainer::pieces_of(const std::function<void(size_t, size_t, float*)>& read) const {
  return [this, read](int id, float* piece) {
    const ModelPartition& part = layout_.partition();
    for (const ShardRun& run : shard_runs(layout_.tensor(id), part.tp, part.tp_rank))
      read(canonical_offset_[id] + run.whole, run.len, piece + run.local);
  };
}

void Trainer::load(const CheckpointReader& r) {
  const CheckpointHeader& h = r.header();
  check_checkpoint_matches(h, o_);
  if (h.num_params != layout_.model_params()) throw TrainError("checkpoint parameter count differs");
  // Read on the host, then copied into the kernels' memory.
  auto section = [&](Section s) {
    return [&r, s](size_t first, size_t n, float* out) { r.read(s, first, n, out); };
  };
  fill(pieces_of(section(Section::params)), params_, sharded());
  // The moments this rank's optimizer keeps: all, or its ZeRO slices.
  fill(pieces_of(section(Section::adam_m)), opt_.m(), o_.zero > 0);
  fill(pieces_of(section(Section::adam_v)), opt_.v(), o_.zero > 0);
  step_ = static_cast<int>(h.step);
  sampler_.restore(h.data_rng, h.batches_drawn);
}

}  // namespace strata::train
