// Trainer: setup, one training step, evaluation and sampling. Saving and loading are in
// trainer_state.cpp, the memory report in memory_report.cpp.
#include "trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "errors.hpp"

namespace strata::train {
namespace {

size_t bucket_elems(double mb) {
  double e = mb * 1e6 / sizeof(float);
  return e < 1 ? 1 : static_cast<size_t>(e);
}

}  // namespace

Trainer::Trainer(const Options& o, Group& group, const TextData& data, const Kernels& k)
    : o_(o),
      group_(group),
      data_(data),
      k_(k),
      local_batch_(o.batch / group.data_ranks()),
      layout_(o.model, group.size(), bucket_elems(o.bucket_mb)),
      params_(layout_.padded_size()),
      sync_(group, layout_, o.zero),
      opt_(AdamWConfig{o.lr, 0.9f, 0.95f, 1e-8f, o.wd}, sync_.state_size()),
      schedule_{o.lr, o.warmup, o.steps, 0.1f},
      sampler_(o.seed),
      inputs_(static_cast<size_t>(local_batch_) * o.model.ctx),
      targets_(inputs_.size()) {
  init_params(layout_, params_.data(), o.seed);
  model_ = std::make_unique<Gpt>(layout_, params_.data(), k_, local_batch_);
  size_t off = 0;
  for (const auto& t : layout_.tensors()) {
    canonical_offset_.push_back(off);
    off += t.size;
  }
}

StepResult Trainer::train_step() {
  const int T = o_.model.ctx;
  sampler_.next(data_, o_.batch, T, group_.data_rank(), group_.data_ranks(), inputs_.data(), targets_.data());
  sync_.begin_step();
  loss_ = model_->forward(inputs_.data(), targets_.data(), local_batch_, T);
  // Queued ahead of the gradient buckets; it completes while backward runs. (A member, not
  // a local: the reduction writes to it from the communicator's thread.)
  strata::Request loss_req = group_.all_reduce_avg(&loss_, 1);
  model_->backward(sync_);
  // From here on, time spent is communication that backward did not hide.
  auto t0 = std::chrono::steady_clock::now();
  sync_.finish();
  loss_req.wait();
  StepResult r;
  r.loss = loss_;
  r.grad_norm = sync_.global_norm(k_);
  auto t1 = std::chrono::steady_clock::now();
  r.lr = schedule_.at(step_ + 1);
  opt_.step(k_, sync_.segments(), params_.data(), sync_.grads(), step_ + 1, r.lr,
            clip_scale(r.grad_norm, o_.clip));
  auto t2 = std::chrono::steady_clock::now();
  sync_.gather_params(params_.data());
  r.comm_wait_s =
      std::chrono::duration<double>(t1 - t0 + std::chrono::steady_clock::now() - t2).count();
  ++step_;
  return r;
}

double Trainer::evaluate() {
  const int T = o_.model.ctx;
  // Every slice of each validation batch, shared out over this group's ranks (one each,
  // unless the group is one island of several: DiLoCo).
  double sum = 0;
  int done = 0;
  for (int i = 0; i < o_.eval_batches; ++i) {
    for (int slice = group_.rank(); slice < group_.data_ranks(); slice += group_.size(), ++done) {
      val_batch(data_, i, o_.batch, T, slice, group_.data_ranks(), inputs_.data(), targets_.data());
      sum += model_->forward(inputs_.data(), targets_.data(), local_batch_, T);
    }
  }
  float mean = done ? static_cast<float>(sum / done) : 0.0f;
  group_.all_reduce_avg(&mean, 1).wait();
  return mean;
}

std::string Trainer::sample(int len, uint64_t seed) {
  const int T = o_.model.ctx, V = o_.model.vocab;
  Rng rng(stream_seed(seed, 0x5a3b1e));
  std::vector<int> ctx{'\n'};
  std::string out;
  for (int i = 0; i < len; ++i) {
    int n = static_cast<int>(std::min<size_t>(ctx.size(), T));
    const int* window = ctx.data() + ctx.size() - n;
    model_->forward(window, nullptr, 1, n);
    const float* p = model_->probs() + static_cast<size_t>(n - 1) * V;
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
    out.push_back(static_cast<char>(next));
  }
  return out;
}

uint64_t Trainer::param_checksum() const {
  uint64_t h = fnv1a(nullptr, 0);
  for (const auto& t : layout_.tensors())
    h = fnv1a(params_.data() + t.offset, t.size * sizeof(float), h);
  return h;
}

}  // namespace strata::train
