#include "grad_sync.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace strata::train {

GradSync::GradSync(Group& group, const ParamLayout& layout, int zero, const Kernels& k, int staging_buffers)
    : group_(&group), layout_(layout), zero_(zero), staging_target_(staging_buffers), k_(k) {
  if (zero < 0 || zero > 3) throw std::invalid_argument("zero must be 0, 1, 2 or 3");
  if (layout.shards() != group.size()) throw std::invalid_argument("layout shards != ranks");
  segments_ = zero == 0 ? layout.all_segments() : layout.shard_segments(group.rank(), zero >= 2, zero == 3);
  if (zero >= 2) {
    shard_ = Buffer<float>(k, layout.shard_size());
    for (int i = 0; i < staging_buffers; ++i) {
      pool_.emplace_back(k, layout.max_bucket());
      free_.push_back(i);
    }
  } else {
    full_ = Buffer<float>(k, layout.padded_size());
  }
  staging_of_.assign(layout.buckets().size(), -1);
}

size_t GradSync::grad_bytes() const {
  return (full_.size() + shard_.size()) * sizeof(float) + staging_bytes();
}

void GradSync::abandon() {
  for (InFlight& f : inflight_) {
    try {
      f.req.wait();
    } catch (const std::exception&) {  // the failure the caller is recovering from
    }
    if (f.staging >= 0) free_.push_back(f.staging);
    if (f.wire >= 0) wire_free_.push_back(f.wire);
  }
  inflight_.clear();
}

void GradSync::rebind(Group& group) {
  if (zero_ != 0) throw std::logic_error("only zero 0 reduces over another group: shards are per rank");
  group_ = &group;
}

void GradSync::begin_step() {
  if (!inflight_.empty()) throw std::logic_error("begin_step with reductions in flight");
  if (zero_ < 2) k_.zero(full_.data(), full_.bytes());
  std::fill(staging_of_.begin(), staging_of_.end(), -1);
  next_bucket_ = static_cast<int>(layout_.buckets().size()) - 1;
}

float* GradSync::grad(int tensor) {
  const TensorInfo& t = layout_.tensor(tensor);
  if (zero_ < 2) return full_.data() + t.offset;
  int b = layout_.bucket_of(tensor);
  if (b > next_bucket_) throw std::logic_error("gradient requested after its bucket was sent");
  if (staging_of_[b] < 0) staging_of_[b] = acquire();
  return pool_[staging_of_[b]].data() + (t.offset - layout_.buckets()[b].offset);
}

int GradSync::acquire() {
  while (free_.empty()) {
    // Reuse a buffer whose reduction is done; wait for one only if the pool is at its
    // target size, and never when nothing is in flight (that would wait forever).
    if (inflight_.empty() || static_cast<int>(pool_.size()) < staging_target_) {
      pool_.emplace_back(k_, layout_.max_bucket());
      free_.push_back(static_cast<int>(pool_.size()) - 1);
      break;
    }
    retire_oldest();
  }
  int i = free_.back();
  free_.pop_back();
  k_.zero(pool_[i].data(), pool_[i].bytes());
  return i;
}

void GradSync::retire_oldest() {
  InFlight f = std::move(inflight_.front());
  inflight_.pop_front();
  f.req.wait();
  if (f.staging >= 0) free_.push_back(f.staging);
  if (f.wire >= 0) {
    k_.from_bf16(f.back, f.reduced, f.len, 1.0f / static_cast<float>(group_->size()));
    wire_free_.push_back(f.wire);
  }
}

void GradSync::retire_done() {
  while (!inflight_.empty() && inflight_.front().req.test()) retire_oldest();
}

void GradSync::ready_from(int tensor) {
  while (next_bucket_ >= 0 && layout_.buckets()[next_bucket_].first_tensor >= tensor)
    launch(next_bucket_--);
}

void GradSync::launch(int k) {
  const Bucket& b = layout_.buckets()[k];
  const size_t n = layout_.slice(b);
  const int r = group_->rank();
  InFlight f;
  // zero 0: the bucket's real elements, averaged in place; zero 1, 2: the padded bucket
  // (from the full gradient, or a staging buffer), this rank's slice of n averaged into dst.
  const bool scatter = zero_ != 0;
  const float* src = full_.data() + b.offset;
  float* dst = full_.data() + b.offset + (scatter ? r * n : 0);
  const size_t len = scatter ? n : b.real;
  if (zero_ >= 2) {
    // A bucket backward never touched (not possible for this model, but cheap to allow)
    // still takes part: every rank must issue the same collectives.
    if (staging_of_[k] < 0) staging_of_[k] = acquire();
    f.staging = staging_of_[k];
    src = pool_[f.staging].data();
    dst = shard_.data() + b.shard_offset;
  }
  if (!bf16_) {
    f.req = scatter ? group_->reduce_scatter_avg(src, dst, len) : group_->all_reduce(src, dst, len, strata::ReduceOp::avg);
  } else {
    if (wire_free_.empty()) {
      wire_.emplace_back(k_, layout_.max_bucket());
      wire_free_.push_back(static_cast<int>(wire_.size()) - 1);
    }
    f.wire = wire_free_.back();
    wire_free_.pop_back();
    uint16_t* w = wire_[f.wire].data();
    k_.to_bf16(w, src, scatter ? len * group_->size() : len);
    uint16_t* reduced = scatter ? w + r * n : w;
    f.req = scatter ? group_->reduce_scatter(w, reduced, len, strata::DataType::bfloat16, strata::ReduceOp::sum)
                    : group_->all_reduce(w, reduced, len, strata::DataType::bfloat16, strata::ReduceOp::sum);
    f.reduced = reduced;
    f.back = dst;
    f.len = len;
  }
  inflight_.push_back(std::move(f));
  retire_done();
}

void GradSync::finish() {
  ready_from(0);
  while (!inflight_.empty()) retire_oldest();
}

double GradSync::norm_squared(const Kernels& k) {
  const float* g = grads();
  double local = 0;
  for (const Segment& s : segments_)
    if (s.counted) local += k.sum_squares(g + s.grad, s.len);
  // zero 0: every rank holds the same whole gradient, so its own sum is the group's.
  return zero_ == 0 ? local : group_->all_reduce_sum(local);
}

void GradSync::gather_params(float* params) {
  if (zero_ == 0 || zero_ == 3) return;
  std::vector<strata::Request> reqs;
  for (const Bucket& b : layout_.buckets())
    reqs.push_back(group_->all_gather(params + b.offset, layout_.slice(b)));
  for (auto& r : reqs) r.wait();
}

}  // namespace strata::train
