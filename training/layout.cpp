#include "layout.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace strata::train {

namespace {

std::string must_divide(const char* what, int n, int tp) {
  return std::string(what) + " " + std::to_string(n) + " do not divide over " + std::to_string(tp) +
         " tensor-parallel ranks";
}

}  // namespace

std::vector<ShardRun> shard_runs(const TensorInfo& t, int tp, int rank) {
  const size_t rows = static_cast<size_t>(t.shape[0]);
  const size_t row_len = t.full_size / rows;
  std::vector<ShardRun> runs;
  switch (t.split) {
    case Split::none:
      runs.push_back({0, 0, t.full_size});
      break;
    case Split::rows: {
      const size_t n = rows / tp * row_len;
      runs.push_back({rank * n, 0, n});
      break;
    }
    case Split::qkv_rows: {  // q, k, v: three blocks of rows/3, each cut by heads
      const size_t block = rows / 3 * row_len, n = block / tp;
      for (size_t b = 0; b < 3; ++b) runs.push_back({b * block + rank * n, b * n, n});
      break;
    }
    case Split::cols: {
      const size_t n = row_len / tp;
      for (size_t r = 0; r < rows; ++r) runs.push_back({r * row_len + rank * n, r * n, n});
      break;
    }
  }
  return runs;
}

ParamLayout::ParamLayout(const ModelConfig& cfg, const ModelPartition& part, int shards,
                         size_t bucket_elems, bool group_buckets)
    : cfg_(cfg), part_(part), shards_(shards < 1 ? 1 : shards) {
  const int tp = part.tp;
  if (cfg.heads % tp) throw std::invalid_argument(must_divide("heads", cfg.heads, tp));
  if (cfg.vocab % tp) throw std::invalid_argument(must_divide("vocabulary entries", cfg.vocab, tp));
  auto in_chunk = [&](auto pred) {
    for (const Chunk& c : part.chunks)
      if (pred(c)) return true;
    return false;
  };
  const bool embedding = in_chunk([](const Chunk& c) { return c.embedding; });
  const bool head = in_chunk([](const Chunk& c) { return c.head; });
  // held: whether this rank holds the tensor at all.
  auto add = [&](std::string name, std::vector<int> shape, bool decay, Split split, bool held) {
    TensorInfo t;
    t.name = std::move(name);
    t.full_size = 1;
    for (int d : shape) t.full_size *= static_cast<size_t>(d);
    t.shape = std::move(shape);
    t.decay = decay;
    t.split = split;
    t.layernorm = !decay && t.name.find("ln_") != std::string::npos;
    t.size = held ? (split == Split::none ? t.full_size : t.full_size / tp) : 0;
    t.counted = held && (split != Split::none || part.tp_rank == 0);
    model_params_ += t.full_size;
    tensors_.push_back(std::move(t));
  };
  const int c = cfg.dim;
  add("wte", {cfg.vocab, c}, true, Split::rows, embedding || head);
  tensors_.back().counted &= embedding;  // the head's copy of the tied embedding is a copy
  add("wpe", {cfg.ctx, c}, true, Split::none, embedding);
  for (int l = 0; l < cfg.layers; ++l) {
    const bool held = in_chunk([l](const Chunk& ch) { return l >= ch.first_layer && l < ch.end_layer; });
    std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {c}, false, Split::none, held);
    add(p + "ln_1.bias", {c}, false, Split::none, held);
    add(p + "attn.c_attn.weight", {3 * c, c}, true, Split::qkv_rows, held);
    add(p + "attn.c_attn.bias", {3 * c}, false, Split::qkv_rows, held);
    add(p + "attn.c_proj.weight", {c, c}, true, Split::cols, held);
    add(p + "attn.c_proj.bias", {c}, false, Split::none, held);
    add(p + "ln_2.weight", {c}, false, Split::none, held);
    add(p + "ln_2.bias", {c}, false, Split::none, held);
    add(p + "mlp.c_fc.weight", {4 * c, c}, true, Split::rows, held);
    add(p + "mlp.c_fc.bias", {4 * c}, false, Split::rows, held);
    add(p + "mlp.c_proj.weight", {c, 4 * c}, true, Split::cols, held);
    add(p + "mlp.c_proj.bias", {c}, false, Split::none, held);
  }
  add("ln_f.weight", {c}, false, Split::none, head);
  add("ln_f.bias", {c}, false, Split::none, head);

  // Buckets are filled from the last held tensor backwards, the order backward finishes
  // them; a bucket's id range also covers tensors inside it that this rank lacks.
  if (bucket_elems == 0) bucket_elems = 1;
  const int n = static_cast<int>(tensors_.size());
  int lowest = n;
  for (int t = n - 1; t >= 0; --t)
    if (holds(t)) lowest = t;
  std::vector<Bucket> rev;
  Bucket cur;
  cur.end_tensor = n;
  for (int t = n - 1; t >= lowest; --t) {
    if (!holds(t)) continue;
    // group_buckets: a bucket ends where the next tensor down belongs to another group.
    if (group_buckets && cur.real > 0 && layer_group(cfg, t) != layer_group(cfg, cur.first_tensor)) {
      rev.push_back(cur);
      cur = Bucket{};
      cur.end_tensor = rev.back().first_tensor;
    }
    cur.first_tensor = t;
    cur.real += tensors_[t].size;
    if (cur.real >= bucket_elems || t == lowest) {
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

  spans_.assign(layer_groups(cfg), GroupSpan{});
  for (size_t k = 0; k < buckets_.size(); ++k)
    for (int t = buckets_[k].first_tensor; t < buckets_[k].end_tensor; ++t) {
      if (!holds(t)) continue;
      GroupSpan& g = spans_[layer_group(cfg, t)];
      if (g.end_bucket == 0) g.first_bucket = static_cast<int>(k), g.offset = buckets_[k].offset;
      g.end_bucket = static_cast<int>(k) + 1;
      g.padded = buckets_[k].offset + buckets_[k].padded - g.offset;
    }
}

void ParamLayout::flat_to_shard(int rank, const float* flat, float* shard) const {
  for (const Bucket& b : buckets_)
    std::memcpy(shard + b.shard_offset, flat + slice_offset(b, rank), slice(b) * sizeof(float));
}

void ParamLayout::whole_to_piece(int tensor, const float* whole, float* piece) const {
  for (const ShardRun& r : shard_runs(tensors_[tensor], part_.tp, part_.tp_rank))
    std::memcpy(piece + r.local, whole + r.whole, r.len * sizeof(float));
}

void ParamLayout::piece_to_whole(int tensor, const float* piece, float* whole) const {
  for (const ShardRun& r : shard_runs(tensors_[tensor], part_.tp, part_.tp_rank))
    std::memcpy(whole + r.whole, piece + r.local, r.len * sizeof(float));
}

size_t ParamLayout::max_bucket() const {
  size_t m = 0;
  for (const auto& b : buckets_) m = std::max(m, b.padded);
  return m;
}

std::vector<Segment> ParamLayout::all_segments() const {
  std::vector<Segment> segs;
  for (const auto& t : tensors_)
    if (t.size) segs.push_back({t.offset, t.offset, t.offset, t.size, t.decay, t.counted});
  return segs;
}

std::vector<Segment> ParamLayout::shard_segments(int rank, bool shard_grads, bool shard_params) const {
  std::vector<Segment> segs;
  for (const auto& b : buckets_) {
    size_t lo = slice_offset(b, rank), hi = lo + slice(b);
    for (int id = b.first_tensor; id < b.end_tensor; ++id) {
      const TensorInfo& t = tensors_[id];
      size_t a = std::max(lo, t.offset), e = std::min(hi, t.offset + t.size);
      if (a >= e) continue;
      size_t state = b.shard_offset + (a - lo);
      segs.push_back({shard_params ? state : a, shard_grads ? state : a, state, e - a, t.decay, t.counted});
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
