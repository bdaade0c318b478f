// Where every parameter this rank holds lives in its one flat buffer, how that buffer is
// cut into gradient buckets, and which part of it each data-parallel rank owns under ZeRO.
//
// A rank holds the tensors of its pipeline chunks (ModelPartition), each cut over the
// tensor-parallel ranks as Megatron cuts it (Split); the serial model is one chunk of
// every layer on one tensor-parallel rank. Tensors keep their ids in the whole model
// (wte, wpe, layer 0 .. layer L-1, final LayerNorm) and are stored in that order, so
// backward finishes them from the end of the buffer towards the start: a bucket is a
// run of whole tensors and is complete once backward has passed its first tensor.
// Each bucket is padded to a multiple of the data-parallel rank count so that
// reduce-scatter and all-gather can split it evenly; rank r owns slice r of every bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::train {

struct ModelConfig {
  int vocab = 256;  // byte-level: no tokenizer
  int ctx = 64;     // maximum sequence length (position embeddings)
  int layers = 4;
  int heads = 4;
  int dim = 128;
};

// Per-layer tensors, in storage order.
enum LayerTensor : int {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kAttProjW,
  kAttProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB,
  kTensorsPerLayer
};

inline int tensor_wte() { return 0; }
inline int tensor_wpe() { return 1; }
inline int tensor_layer(int layer, LayerTensor t) { return 2 + layer * kTensorsPerLayer + t; }
inline int tensor_lnf_w(const ModelConfig& c) { return 2 + c.layers * kTensorsPerLayer; }
inline int tensor_lnf_b(const ModelConfig& c) { return tensor_lnf_w(c) + 1; }
inline int tensor_count(const ModelConfig& c) { return tensor_lnf_b(c) + 1; }

// The model's layer groups: 0 the embeddings (wte, wpe), 1 + l block l, layers + 1 the
// final LayerNorm. What ZeRO-3 gathers at a time, and what DiLoCo's fragments are made of.
inline int layer_groups(const ModelConfig& c) { return c.layers + 2; }
inline int layer_group(const ModelConfig& c, int tensor) {
  return tensor < tensor_layer(0, kLn1W) ? 0 : tensor >= tensor_lnf_w(c) ? c.layers + 1
                                                                          : 1 + (tensor - tensor_layer(0, kLn1W)) / kTensorsPerLayer;
}

// How a tensor is cut over T tensor-parallel ranks (Megatron-LM): rank t holds piece t.
enum class Split : uint8_t {
  none,      // replicated: LayerNorms, wpe, the biases of row-parallel layers
  rows,      // the first dimension in T pieces: column-parallel c_fc, wte's vocabulary
  qkv_rows,  // c_attn: q, k and v (C rows each) each cut by heads
  cols,      // the second dimension: the row-parallel projections (c_proj)
};

// One pipeline chunk: a run of layers, with the embedding (first stage) and/or the
// output head and final LayerNorm (last stage).
struct Chunk {
  int first_layer = 0, end_layer = 0;
  bool embedding = false, head = false;
};

// What one rank holds: its chunks, in forward order, and its piece of each tensor.
struct ModelPartition {
  int tp = 1, tp_rank = 0;
  std::vector<Chunk> chunks;
  static ModelPartition whole(const ModelConfig& c) { return {1, 0, {{0, c.layers, true, true}}}; }
};

struct TensorInfo {
  std::string name;        // GPT-2's names, e.g. "h.2.mlp.c_fc.weight"
  std::vector<int> shape;  // of the whole tensor
  size_t full_size = 0;    // elements of the whole tensor
  size_t offset = 0;       // in the flat buffer (padding included)
  size_t size = 0;         // elements this rank holds; 0: not on this rank
  bool decay = false;      // weight decay applies to matrices and embeddings only
  bool layernorm = false;  // a LayerNorm gain or bias
  Split split = Split::none;
  // Counts once toward the global gradient norm: false for a replicated tensor on a
  // tensor-parallel rank other than 0, and for the last stage's copy of the tied wte.
  bool counted = false;
};

// A run of a tensor piece: the piece's elements [local, local+len) are the whole
// tensor's [whole, whole+len).
struct ShardRun {
  size_t whole, local, len;
};
// The runs that make up tensor-parallel rank `rank`'s piece of `t` (of `tp` pieces).
std::vector<ShardRun> shard_runs(const TensorInfo& t, int tp, int rank);

struct Bucket {
  int first_tensor = 0;  // tensors [first_tensor, end_tensor)
  int end_tensor = 0;
  size_t offset = 0;        // flat range [offset, offset + padded)
  size_t real = 0;          // parameters in it; the rest is zero padding
  size_t padded = 0;        // multiple of the rank count
  size_t shard_offset = 0;  // where this bucket's slice starts in a rank's shard
};

// A layer group's part of this rank's buffer: whole buckets [first_bucket, end_bucket),
// the flat range [offset, offset + padded) (empty when the rank holds none of the group).
struct GroupSpan {
  int first_bucket = 0, end_bucket = 0;
  size_t offset = 0, padded = 0;
};

// A contiguous run of real (non-padding) parameters that one rank's optimizer updates.
struct Segment {
  size_t param = 0;  // offset in the parameter buffer the optimizer updates (flat, or a ZeRO-3 shard)
  size_t grad = 0;   // offset in the gradient buffer the optimizer reads
  size_t state = 0;  // offset in the Adam moment buffers
  size_t len = 0;
  bool decay = false;
  bool counted = true;  // toward the global gradient norm (TensorInfo::counted)
};

class ParamLayout {
 public:
  // `shards`: data-parallel ranks; `bucket_elems`: target bucket size (a tensor larger
  // than that gets a bucket of its own); `group_buckets`: no bucket spans two layer groups
  // (ZeRO-3 gathers a group as its whole buckets). Throws std::invalid_argument when the
  // tensor-parallel ranks do not divide the heads or the vocabulary.
  ParamLayout(const ModelConfig& cfg, const ModelPartition& part, int shards, size_t bucket_elems,
              bool group_buckets = false);
  // The whole model on one rank.
  ParamLayout(const ModelConfig& cfg, int shards, size_t bucket_elems, bool group_buckets = false)
      : ParamLayout(cfg, ModelPartition::whole(cfg), shards, bucket_elems, group_buckets) {}

  const ModelConfig& config() const { return cfg_; }
  const ModelPartition& partition() const { return part_; }
  bool holds(int tensor) const { return tensors_[tensor].size > 0; }
  // Copies between the whole tensor and this rank's piece of it.
  void whole_to_piece(int tensor, const float* whole, float* piece) const;
  void piece_to_whole(int tensor, const float* piece, float* whole) const;
  size_t model_params() const { return model_params_; }  // Ψ of the whole model
  int shards() const { return shards_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& tensor(int id) const { return tensors_[id]; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  int bucket_of(int tensor) const { return bucket_of_[tensor]; }

  size_t num_params() const { return num_params_; }    // Ψ held by this rank
  size_t padded_size() const { return padded_size_; }  // flat buffer length
  size_t shard_size() const { return padded_size_ / shards_; }
  size_t max_bucket() const;  // largest padded bucket

  size_t slice(const Bucket& b) const { return b.padded / shards_; }
  // Flat offset of `rank`'s slice of bucket b.
  size_t slice_offset(const Bucket& b, int rank) const { return b.offset + rank * slice(b); }

  // Every real parameter, with state (and grad) offsets equal to the flat offset.
  std::vector<Segment> all_segments() const;
  // The real parameters in `rank`'s slices; state offsets index a shard of shard_size().
  // grad (param) offsets are flat when `shard_grads` (`shard_params`) is false, shard
  // offsets when true.
  std::vector<Segment> shard_segments(int rank, bool shard_grads, bool shard_params = false) const;
  // `rank`'s slices of a flat buffer, back to back: its shard (ZeRO-3's parameters).
  void flat_to_shard(int rank, const float* flat, float* shard) const;

  // Layer group g's buckets (group_buckets layouts: a run of whole buckets). Empty where
  // this rank holds nothing of it.
  const GroupSpan& group_span(int g) const { return spans_[g]; }
 private:
  ModelConfig cfg_;
  ModelPartition part_;
  int shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<GroupSpan> spans_;  // by layer group
  size_t num_params_ = 0;
  size_t model_params_ = 0;
  size_t padded_size_ = 0;
};

// Copies between the flat (padded) buffer and the canonical order: all tensors back to
// back, no padding. Checkpoints and the PyTorch reference use the canonical order of the
// whole model, so they do not depend on the layout; for a layout that holds a part of
// the model these copy the pieces it holds, back to back.
void flat_to_canonical(const ParamLayout& l, const float* flat, float* canonical);
void canonical_to_flat(const ParamLayout& l, const float* canonical, float* flat);

}  // namespace strata::train
