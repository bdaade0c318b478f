#include "layout.hpp"

#include <algorithm>
#include <cstring>

namespace strata::train {

ParamLayout::ParamLayout(const ModelConfig& cfg, int shards, size_t bucket_elems)
    : cfg_(cfg), shards_(shards < 1 ? 1 : shards) {
  auto add = [&](std::string name, std::vector<int> shape, bool decay) {
    TensorInfo t;
    t.name = std::move(name);
    t.size = 1;
    for (int d : shape) t.size *= static_cast<size_t>(d);
    t.shape = std::move(shape);
    t.decay = decay;
    tensors_.push_back(std::move(t));
  };
  const int c = cfg.dim;
  add("wte", {cfg.vocab, c}, true);
  add("wpe", {cfg.ctx, c}, true);
  for (int l = 0; l < cfg.layers; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {c}, false);
    add(p + "ln_1.bias", {c}, false);
    add(p + "attn.c_attn.weight", {3 * c, c}, true);
    add(p + "attn.c_attn.bias", {3 * c}, false);
    add(p + "attn.c_proj.weight", {c, c}, true);
    add(p + "attn.c_proj.bias", {c}, false);
    add(p + "ln_2.weight", {c}, false);
    add(p + "ln_2.bias", {c}, false);
    add(p + "mlp.c_fc.weight", {4 * c, c}, true);
    add(p + "mlp.c_fc.bias", {4 * c}, false);
    add(p + "mlp.c_proj.weight", {c, 4 * c}, true);
    add(p + "mlp.c_proj.bias", {c}, false);
  }
  add("ln_f.weight", {c}, false);
  add("ln_f.bias", {c}, false);

  // Buckets are filled from the last tensor backwards, the order backward finishes them.
  if (bucket_elems == 0) bucket_elems = 1;
  std::vector<Bucket> rev;
  int n = static_cast<int>(tensors_.size());
  Bucket cur;
  cur.end_tensor = n;
  for (int t = n - 1; t >= 0; --t) {
    cur.first_tensor = t;
    cur.real += tensors_[t].size;
    if (cur.real >= bucket_elems || t == 0) {
      rev.push_back(cur);
      cur = Bucket{};
      cur.end_tensor = t;
    }
  }
  buckets_.assign(rev.rbegin(), rev.rend());

  bucket_of_.assign(n, 0);
  size_t off = 0, shard_off = 0;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    b.offset = off;
    for (int t = b.first_tensor; t < b.end_tensor; ++t) {
      tensors_[t].offset = off;
      off += tensors_[t].size;
      bucket_of_[t] = static_cast<int>(k);
    }
    b.padded = (b.real + shards_ - 1) / shards_ * shards_;
    b.shard_offset = shard_off;
    shard_off += b.padded / shards_;
    off = b.offset + b.padded;
    num_params_ += b.real;
  }
  padded_size_ = off;
}

size_t ParamLayout::max_bucket() const {
  size_t m = 0;
  for (const auto& b : buckets_) m = std::max(m, b.padded);
  return m;
}

std::vector<Segment> ParamLayout::all_segments() const {
  std::vector<Segment> segs;
  for (const auto& t : tensors_) segs.push_back({t.offset, t.offset, t.offset, t.size, t.decay});
  return segs;
}

std::vector<Segment> ParamLayout::shard_segments(int rank, bool shard_grads) const {
  std::vector<Segment> segs;
  for (const auto& b : buckets_) {
    size_t lo = slice_offset(b, rank), hi = lo + slice(b);
    for (int id = b.first_tensor; id < b.end_tensor; ++id) {
      const TensorInfo& t = tensors_[id];
      size_t a = std::max(lo, t.offset), e = std::min(hi, t.offset + t.size);
      if (a >= e) continue;
      size_t state = b.shard_offset + (a - lo);
      segs.push_back({a, shard_grads ? state : a, state, e - a, t.decay});
    }
  }
  return segs;
}

void flat_to_canonical(const ParamLayout& l, const float* flat, float* canonical) {
  for (const auto& t : l.tensors()) {
    std::memcpy(canonical, flat + t.offset, t.size * sizeof(float));
    canonical += t.size;
  }
}

void canonical_to_flat(const ParamLayout& l, const float* canonical, float* flat) {
  std::memset(flat, 0, l.padded_size() * sizeof(float));
  for (const auto& t : l.tensors()) {
    std::memcpy(flat + t.offset, canonical, t.size * sizeof(float));
    canonical += t.size;
  }
}

}  // namespace strata::train
