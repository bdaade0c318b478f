// Where every parameter lives in the one flat buffer, how that buffer is cut into
// gradient buckets, and which part of it each data-parallel rank owns under ZeRO.
//
// Tensors are stored in forward order (wte, wpe, layer 0 .. layer L-1, final LayerNorm),
// so backward finishes them from the end of the buffer towards the start: a bucket is a
// run of whole tensors and is complete once backward has passed its first tensor.
// Each bucket is padded to a multiple of the rank count so that reduce-scatter and
// all-gather can split it evenly; rank r owns slice r of every bucket.
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

struct TensorInfo {
  std::string name;  // GPT-2's names, e.g. "h.2.mlp.c_fc.weight"
  std::vector<int> shape;
  size_t offset = 0;  // in the flat buffer (padding included)
  size_t size = 0;
  bool decay = false;  // weight decay applies to matrices and embeddings only
};

struct Bucket {
  int first_tensor = 0;  // tensors [first_tensor, end_tensor)
  int end_tensor = 0;
  size_t offset = 0;        // flat range [offset, offset + padded)
  size_t real = 0;          // parameters in it; the rest is zero padding
  size_t padded = 0;        // multiple of the rank count
  size_t shard_offset = 0;  // where this bucket's slice starts in a rank's shard
};

// A contiguous run of real (non-padding) parameters that one rank's optimizer updates.
struct Segment {
  size_t param = 0;  // offset in the flat parameter buffer
  size_t grad = 0;   // offset in the gradient buffer the optimizer reads
  size_t state = 0;  // offset in the Adam moment buffers
  size_t len = 0;
  bool decay = false;
};

class ParamLayout {
 public:
  // `shards`: data-parallel ranks; `bucket_elems`: target bucket size (a tensor larger
  // than that gets a bucket of its own).
  ParamLayout(const ModelConfig& cfg, int shards, size_t bucket_elems);

  const ModelConfig& config() const { return cfg_; }
  int shards() const { return shards_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& tensor(int id) const { return tensors_[id]; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  int bucket_of(int tensor) const { return bucket_of_[tensor]; }

  size_t num_params() const { return num_params_; }    // Ψ
  size_t padded_size() const { return padded_size_; }  // flat buffer length
  size_t shard_size() const { return padded_size_ / shards_; }
  size_t max_bucket() const;  // largest padded bucket

  size_t slice(const Bucket& b) const { return b.padded / shards_; }
  // Flat offset of `rank`'s slice of bucket b.
  size_t slice_offset(const Bucket& b, int rank) const { return b.offset + rank * slice(b); }

  // Every real parameter, with state (and grad) offsets equal to the flat offset.
  std::vector<Segment> all_segments() const;
  // The real parameters in `rank`'s slices; state offsets index a shard of shard_size().
  // grad offsets are flat when `shard_grads` is false, shard offsets when true.
  std::vector<Segment> shard_segments(int rank, bool shard_grads) const;

 private:
  ModelConfig cfg_;
  int shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  size_t num_params_ = 0;
  size_t padded_size_ = 0;
};

// Copies between the flat (padded) buffer and the canonical order: all tensors back to
// back, no padding. Checkpoints and the PyTorch reference use the canonical order, so they
// do not depend on the rank count or bucket size.
void flat_to_canonical(const ParamLayout& l, const float* flat, float* canonical);
void canonical_to_flat(const ParamLayout& l, const float* canonical, float* flat);

}  // namespace strata::train
