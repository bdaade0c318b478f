// Trainer: setup, one training step, evaluation and sampling. Saving and loading are in
// trainer_state.cpp, the memory report in memory_report.cpp.
#include "trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "errors.hpp"

namespace strata::train {
namespace {

Schedule schedule_of(const Options& o) { return *parse_schedule(o.schedule); }

}  // namespace

size_t bucket_elems(const Options& o) {
  double e = o.bucket_mb * 1e6 / sizeof(float);
  return e < 1 ? 1 : static_cast<size_t>(e);
}

ModelPartition partition_of(const Options& o, int tp_rank, int stage) {
  return {o.tp, tp_rank, stage_chunks(o.model.layers, o.pp, o.virtual_stages, stage)};
}

ParamLayout layout_of(const Options& o, int tp_rank, int stage, int shards) {
  return ParamLayout(o.model, partition_of(o, tp_rank, stage), shards, bucket_elems(o), o.zero == 3);
}

Trainer::Trainer(const Options& o, ParallelGroups& groups, const TokenData& data, const Kernels& k)
    : o_(o),
      groups_(groups),
      data_(data),
      k_(k),
      local_batch_(o.batch / groups.data_ranks()),
      micro_batch_(local_batch_ / o.microbatches),
      tp_(groups.tp(), o.sequence_parallel, clock_),
      layout_(layout_of(o, groups.coord(kTp), groups.coord(kPp), groups.size(kDp))),
      params_(k, o.zero == 3 ? layout_.shard_size() : layout_.padded_size()),
      sync_(groups.dp(), layout_, o.zero, k),
      grads_(sync_, layout_, tp_, groups.embedding(), clock_),
      opt_(AdamWConfig{o.lr, 0.9f, 0.95f, 1e-8f, o.wd}, sync_.state_size(), k),
      schedule_{o.lr, o.warmup, o.steps, 0.1f},
      sampler_(o.seed),
      inputs_(static_cast<size_t>(local_batch_) * o.model.ctx),
      targets_(inputs_.size()),
      slices_{groups.data_rank()},
      replica_slices_(groups.size(kDp)),
      step_start_(o.seed) {
  groups.use_memory(k);
  sync_.reduce_in_bf16(o.grad_dtype == "bf16");
  fill([&](int id, float* piece) { init_tensor(layout_, id, o.seed, piece); }, params_, sharded());
  if (sharded()) {
    auto w = std::make_unique<ShardedParams>(groups.dp(), layout_, params_.data(), k, o.prefetch, clock_);
    sharded_ = w.get();
    weights_ = std::move(w);
  } else {
    weights_ = std::make_unique<FlatWeights>(layout_, params_.data());
  }
  for (const Chunk& c : layout_.partition().chunks)
    chunks_.push_back(std::make_unique<Gpt>(layout_, c, *weights_, k_, tp_, micro_batch_, o.recompute));
  build_pipeline(o.microbatches, 0);
  plan_gathers(false);  // sizes ZeRO-3's pool now, so that the memory report shows it
  size_t off = 0;
  for (const auto& t : layout_.tensors()) {
    canonical_offset_.push_back(off);
    off += t.full_size;
  }
}

Trainer::~Trainer() = default;

void Trainer::build_pipeline(int microbatches, float loss_scale) {
  std::vector<Gpt*> chunks;
  for (auto& c : chunks_) chunks.push_back(c.get());
  pipe_ = std::make_unique<Pipeline>(
      chunks, groups_.links(),
      Pipeline::Shape{schedule_of(o_), o_.pp, o_.virtual_stages, microbatches, groups_.coord(kPp), loss_scale}, clock_);
}

void Trainer::plan_gathers(bool evaluation) {
  if (!sharded_) return;
  WeightUses uses;
  for (const PipeAction& a : pipe_->actions(evaluation)) {
    const WeightUses u = weight_uses(o_.model, pipe_->chunk(a.chunk).chunk(), a.forward);
    uses.insert(uses.end(), u.begin(), u.end());
  }
  sharded_->plan(std::move(uses));
}

void Trainer::fill(const PieceOf& piece_of, float* out, bool sharded) const {
  const int r = groups_.coord(kDp);
  std::vector<float> bucket;
  for (const Bucket& b : layout_.buckets()) {
    bucket.assign(b.padded, 0.0f);
    for (int id = b.first_tensor; id < b.end_tensor; ++id)
      if (layout_.holds(id)) piece_of(id, bucket.data() + (layout_.tensor(id).offset - b.offset));
    if (sharded)
      std::copy_n(bucket.data() + r * layout_.slice(b), layout_.slice(b), out + b.shard_offset);
    else
      std::copy(bucket.begin(), bucket.end(), out + b.offset);
  }
}

void Trainer::fill(const PieceOf& piece_of, Buffer<float>& out, bool sharded) const {
  if (!k_.stream()) return fill(piece_of, out.data(), sharded);  // host memory
  std::vector<float> host(out.size());
  fill(piece_of, host.data(), sharded);
  k_.upload(out.data(), host.data(), out.bytes());
}

uint64_t Trainer::checksum(const std::function<bool(const TensorInfo&)>& which) {
  std::vector<float> copy;  // on a device; host memory is read where it is
  const float* mine = k_.stream() ? (copy = params_.to_host()).data() : params_.data();
  Group& dp = groups_.dp();
  std::vector<float> bucket;
  uint64_t h = fnv1a(nullptr, 0);
  for (const Bucket& b : layout_.buckets()) {
    const float* p = mine + b.offset;  // == b.shard_offset with one shard
    if (sharded() && layout_.shards() > 1) {  // one shard is the flat buffer
      bucket.resize(b.padded);
      dp.all_gather(mine + b.shard_offset, bucket.data(), layout_.slice(b)).wait();
      p = bucket.data();
    }
    for (int id = b.first_tensor; id < b.end_tensor; ++id) {
      const TensorInfo& t = layout_.tensor(id);
      if (t.size && which(t)) h = fnv1a(p + (t.offset - b.offset), t.size * sizeof(float), h);
    }
  }
  return h;
}

bool Trainer::reports_loss() const {
  return groups_.coord(kPp) == o_.pp - 1 && groups_.coord(kTp) == 0;
}

StepResult Trainer::train_step() {
  const double t_start = StepClock::now();
  const auto bytes_before = groups_.bytes();
  const int T = o_.model.ctx;
  clock_.reset();
  step_start_ = sampler_;
  mid_step_ = true;
  sampler_.next(data_, o_.batch, T, slices_, groups_.data_ranks(), inputs_.data(), targets_.data());
  sync_.begin_step();
  grads_.begin_step();
  plan_gathers(false);
  const double loss_sum = pipe_->train(inputs_.data(), targets_.data(), micro_batch_, T, grads_);
  // The mean loss reaches every rank from the ranks that compute it (one per data-parallel
  // replica). A member, not a local: the reduction writes to it from the communicator's
  // thread.
  loss_ = reports_loss() ? static_cast<float>(loss_sum / o_.microbatches / replica_slices_) : 0.0f;
  strata::Request loss_req = groups_.world().all_reduce(&loss_, &loss_, 1, strata::ReduceOp::sum);
  StepResult r;
  // From here on, time spent is communication that backward did not hide.
  clock_.comm([&] {
    sync_.finish();
    loss_req.wait();
    double sq = sync_.norm_squared(k_);
    // Each model-parallel rank holds different tensors: their sums add up (once per
    // data-parallel replica, which norm_squared has already summed over).
    if (groups_.model_parallel())
      sq = groups_.world().all_reduce_sum(groups_.coord(kDp) == 0 ? sq : 0.0);
    r.grad_norm = std::sqrt(sq);
  });
  r.loss = loss_;
  r.lr = schedule_.at(step_ + 1);
  opt_.step(k_, sync_.segments(), params_.data(), sync_.grads(), step_ + 1, r.lr,
            clip_scale(r.grad_norm, o_.clip));
  clock_.comm([&] { sync_.gather_params(params_.data()); });
  groups_.check();  // a device collective that failed after its call returned
  r.time_s = StepClock::now() - t_start;
  r.comm_wait_s = clock_.comm_s();
  r.idle_s = clock_.idle_s();
  r.gather_s = clock_.gather_s();
  const auto bytes_after = groups_.bytes();
  for (size_t i = 0; i < r.bytes.size(); ++i) r.bytes[i] = bytes_after[i] - bytes_before[i];
  ++step_;
  mid_step_ = false;
  return r;
}

double Trainer::evaluate() {
  const int T = o_.model.ctx;
  // Every slice of each validation batch, shared out over the data-parallel ranks (one
  // each, unless they are one island of several: DiLoCo, where an island evaluates the
  // whole batch; or survivors of a shrink, which take the dead ranks' slices), run
  // slices_.size() at a time, as the pipeline is shaped for training.
  std::vector<int> mine;
  for (int s = groups_.coord(kDp); s < groups_.data_ranks(); s += groups_.size(kDp)) mine.push_back(s);
  double sum = 0;
  for (int i = 0; i < o_.eval_batches; ++i) {
    for (size_t k = 0; k < mine.size(); k += slices_.size()) {
      const std::vector<int> some(mine.begin() + k, mine.begin() + std::min(mine.size(), k + slices_.size()));
      val_batch(data_, i, o_.batch, T, some, groups_.data_ranks(), inputs_.data(), targets_.data());
      plan_gathers(true);
      sum += pipe_->evaluate(inputs_.data(), targets_.data(), micro_batch_, T);
    }
  }
  // Each slice is evaluated once by the ranks that report the loss.
  float mean = o_.eval_batches && reports_loss()
                   ? static_cast<float>(sum / o_.eval_batches / o_.microbatches / groups_.data_ranks())
                   : 0.0f;
  groups_.world().all_reduce(&mean, &mean, 1, strata::ReduceOp::sum).wait();
  return mean;
}

std::string Trainer::sample(int len, uint64_t seed) {
  const bool root = groups_.world().rank() == 0;
  // The whole model on rank 0: its own, or gathered from the model-parallel ranks.
  std::unique_ptr<ParamLayout> whole;
  std::vector<float> gathered;
  Group one;
  one.set_memory(&k_);
  StepClock unused;
  TensorParallel alone(one, false, unused);
  std::unique_ptr<Gpt> owned;
  Buffer<float> whole_params;
  std::unique_ptr<FlatWeights> whole_weights;
  Gpt* model = chunks_[0].get();
  if (groups_.model_parallel() || sharded()) {
    if (root) {
      whole = std::make_unique<ParamLayout>(o_.model, 1, bucket_elems(o_));
      gathered.assign(whole->padded_size(), 0.0f);
    }
    gather_whole(host_copy(Section::params).data(), sharded(), [&](int id, const float* t) {
      std::memcpy(gathered.data() + whole->tensor(id).offset, t, whole->tensor(id).size * sizeof(float));
    });
    if (root) {
      whole_params = Buffer<float>(k_, gathered.size());
      k_.upload(whole_params.data(), gathered.data(), whole_params.bytes());
      whole_weights = std::make_unique<FlatWeights>(*whole, whole_params.data());
      owned = std::make_unique<Gpt>(*whole, ModelPartition::whole(o_.model).chunks[0], *whole_weights, k_, alone, 1);
      model = owned.get();
    }
  }
  if (!root) return "";
  auto acts = model->make_activations();
  const int T = o_.model.ctx, V = o_.model.vocab;
  Rng rng(stream_seed(seed, 0x5a3b1e));
  std::vector<int> ctx{'\n'};
  std::string out;
  for (int i = 0; i < len; ++i) {
    int n = static_cast<int>(std::min<size_t>(ctx.size(), T));
    const int* window = ctx.data() + ctx.size() - n;
    model->forward(*acts, window, nullptr, 1, n);
    std::vector<float> last(V);
    k_.download(last.data(), acts->probs() + static_cast<size_t>(n - 1) * V, V * sizeof(float));
    const float* p = last.data();
    double u = rng.uniform(), acc = 0;
    int next = V - 1;
    for (int v = 0; v < V; ++v) {
      acc += p[v];
      if (u < acc) {
        next = v;
        break;
      }
    }
    ctx.push_back(next);
    // Bytes as text; other vocabularies (token shards: no tokenizer here) as token ids.
    if (V == 256)
      out.push_back(static_cast<char>(next));
    else
      out += (out.empty() ? "" : " ") + std::to_string(next);
  }
  return out;
}

uint64_t Trainer::param_checksum() {
  return checksum([](const TensorInfo&) { return true; });
}

uint64_t Trainer::replicated_checksum() {
  return checksum([](const TensorInfo& t) { return t.split == Split::none; });
}

uint64_t Trainer::embedding_checksum() {
  const TensorInfo* wte = &layout_.tensor(tensor_wte());
  return checksum([wte](const TensorInfo& t) { return &t == wte; });
}

}  // namespace strata::train
