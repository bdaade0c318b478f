// The tokens a run trains and validates on. A text file's bytes are its tokens
// (vocabulary 256, no tokenizer). A token shard -- a file named *.bin in llm.c's layout: a
// header of 256 int32 (magic 20240520, version 1, the token count), then the tokens as
// uint16 -- holds tokens of any vocabulary up to 65536 (--vocab; GPT-2's is 50257).
// Several files are read back to back. The validation split is the last 10% of them, or
// other files of its own. Each training step draws a global batch of random windows
// from the training split; data-parallel rank r takes the r-th contiguous slice of it, so
// the ranks together see exactly the batch a single process would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rng.hpp"

namespace strata::train {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;

class TokenData {
 public:
  // `files` and `val_files`: comma-separated paths; no `val_files`: the last 10% of
  // `files` validate. Throws TrainError when a file is missing, empty or not a valid shard,
  // holds a token not below `vocab`, or a split is too short for `ctx`.
  static TokenData load(const std::string& files, const std::string& val_files, int ctx, int vocab);
  // One text file's bytes already read, the last 10% validating; `path` names them in errors.
  static TokenData from_bytes(const std::string& path, std::vector<uint8_t> bytes, int ctx);
  // The tokens of file `path` whose contents are `bytes`: a token shard when the name ends
  // in ".bin" (its header checked), else text.
  static std::vector<uint16_t> tokens_of(const std::string& path, const std::vector<uint8_t>& bytes);

  const std::string& path() const { return path_; }  // what was read, for the log
  bool shards() const { return shards_; }           // token shards, not text
  size_t size() const { return tokens_.size(); }
  size_t train_size() const { return split_; }
  size_t val_size() const { return tokens_.size() - split_; }
  const uint16_t* train() const { return tokens_.data(); }
  const uint16_t* val() const { return tokens_.data() + split_; }

 private:
  // The splits made: checked against ctx (+1 token per window).
  static TokenData split(std::string path, std::vector<uint16_t> tokens, size_t split, bool shards, int ctx);
  std::string path_;
  bool shards_ = false;
  std::vector<uint16_t> tokens_;  // training split, then validation
  size_t split_ = 0;
};

// Training windows from a seeded random stream. Its position (the generator state and the
// number of batches drawn) is what a checkpoint stores to resume the same data order.
class BatchSampler {
 public:
  BatchSampler(uint64_t seed);

  // Draws the next global batch of `batch` windows of T+1 tokens and writes this rank's
  // slice (batch/dp windows) as inputs and targets, each [batch/dp, T].
  void next(const TokenData& d, int batch, int T, int rank, int dp, int* inputs, int* targets) {
    next(d, batch, T, std::vector<int>{rank}, dp, inputs, targets);
  }
  // The same for several of the dp slices, back to back in the order given (the slices of
  // a rank that died go to the survivors: strata-train --on-failure shrink).
  void next(const TokenData& d, int batch, int T, const std::vector<int>& slices, int dp, int* inputs, int* targets);

  uint64_t batches_drawn() const { return drawn_; }
  const Rng& rng() const { return rng_; }
  void restore(const uint64_t state[4], uint64_t drawn);

 private:
  Rng rng_;
  uint64_t drawn_ = 0;
};

// Validation batch `index` of `batch` windows (fixed, so every evaluation sees the same
// text): this rank's slice, as for training.
void val_batch(const TokenData& d, int index, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
               int* targets);

}  // namespace strata::train
