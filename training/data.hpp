// Byte-level text data: the file's bytes are the tokens (vocabulary 256). The last 10% is
// the validation split. Each training step draws a global batch of random windows from
// the training split; data-parallel rank r takes the r-th contiguous slice of it, so the
// ranks together see exactly the batch a single process would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rng.hpp"

namespace strata::train {

class TextData {
 public:
  // Throws TrainError when the file is missing, empty, or too short for `ctx`.
  static TextData load(const std::string& path, int ctx);
  // The same from bytes already read; `path` names them in errors.
  static TextData from_bytes(const std::string& path, std::vector<uint8_t> bytes, int ctx);

  const std::string& path() const { return path_; }
  size_t size() const { return bytes_.size(); }
  size_t train_size() const { return split_; }
  size_t val_size() const { return bytes_.size() - split_; }
  const uint8_t* train() const { return bytes_.data(); }
  const uint8_t* val() const { return bytes_.data() + split_; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  size_t split_ = 0;
};

// Training windows from a seeded random stream. Its position (the generator state and the
// number of batches drawn) is what a checkpoint stores to resume the same data order.
class BatchSampler {
 public:
  BatchSampler(uint64_t seed);

  // Draws the next global batch of `batch` windows of T+1 tokens and writes this rank's
  // slice (batch/dp windows) as inputs and targets, each [batch/dp, T].
  void next(const TextData& d, int batch, int T, int rank, int dp, int* inputs, int* targets) {
    next(d, batch, T, std::vector<int>{rank}, dp, inputs, targets);
  }
  // The same for several of the dp slices, back to back in the order given (the slices of
  // a rank that died go to the survivors: strata-train --on-failure shrink).
  void next(const TextData& d, int batch, int T, const std::vector<int>& slices, int dp, int* inputs, int* targets);

  uint64_t batches_drawn() const { return drawn_; }
  const Rng& rng() const { return rng_; }
  void restore(const uint64_t state[4], uint64_t drawn);

 private:
  Rng rng_;
  uint64_t drawn_ = 0;
};

// Validation batch `index` of `batch` windows (fixed, so every evaluation sees the same
// text): this rank's slice, as for training.
void val_batch(const TextData& d, int index, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
               int* targets);

}  // namespace strata::train
