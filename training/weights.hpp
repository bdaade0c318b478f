// Where a model chunk reads its parameters while it computes. A pass opens the layer
// groups it is about to read (layout.hpp: the embeddings, a block, the final LayerNorm),
// reads their tensors, and closes them: on every layout but ZeRO-3 the parameters are one
// flat buffer that is always there (FlatWeights); under ZeRO-3 a group's parameters exist
// only while it is open, gathered from the data-parallel ranks' shards
// (sharded_params.hpp).
#pragma once

#include <vector>

#include "layout.hpp"

namespace strata::train {

// The layer-group sets a run of passes opens, in order (model.hpp: weight_uses).
using WeightUses = std::vector<std::vector<int>>;

class Weights {
 public:
  virtual ~Weights() = default;
  // The tensors of `groups` are read from now until close().
  virtual void open(const std::vector<int>& groups) = 0;
  virtual void close() = 0;
  // Tensor `id` (this rank's piece of it), while its group is open.
  virtual const float* tensor(int id) const = 0;
};

// The flat parameter buffer (ParamLayout's offsets), in the kernels' memory.
class FlatWeights final : public Weights {
 public:
  FlatWeights(const ParamLayout& layout, const float* params) : layout_(layout), params_(params) {}
  void open(const std::vector<int>&) override {}
  void close() override {}
  const float* tensor(int id) const override { return params_ + layout_.tensor(id).offset; }

 private:
  const ParamLayout& layout_;
  const float* params_;
};

// Opens `groups` of `w` for the scope.
class Opened {
 public:
  Opened(Weights& w, const std::vector<int>& groups) : w_(w) { w_.open(groups); }
  ~Opened() { w_.close(); }
  Opened(const Opened&) = delete;
  Opened& operator=(const Opened&) = delete;

 private:
  Weights& w_;
};

}  // namespace strata::train
