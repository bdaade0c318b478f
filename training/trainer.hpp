// One training run on this rank: the parameters, the model, gradient synchronisation, the
// optimizer and the data position, and the operations main strings together (step,
// evaluate, sample, save, load).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "data.hpp"
#include "grad_sync.hpp"
#include "group.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "options.hpp"

namespace strata::train {

struct StepResult {
  double loss;  // mean over the global batch
  double grad_norm;
  float lr;
  double comm_wait_s;  // waiting for reductions and the all-gather (not hidden by backward)
};

class Trainer {
 public:
  Trainer(const Options& o, Group& group, const TextData& data, const Kernels& k);

  int step() const { return step_; }  // optimizer steps completed
  StepResult train_step();
  double evaluate();                           // collective: mean validation loss
  std::string sample(int len, uint64_t seed);  // local: text from this rank's model

  void save(const std::string& dir);  // collective; rank 0 writes
  // Throws TrainError when the checkpoint's model does not match this one.
  void load(const CheckpointReader& r);

  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.data(); }  // the flat (padded) parameter buffer
  CheckpointHeader checkpoint_header() const;  // this run's model, data position and step
  uint64_t param_checksum() const;  // over the canonical parameters
  std::string memory_report() const;
  int staging_peak() const { return sync_.staging_peak(); }

 private:
  const Options& o_;
  Group& group_;
  const TextData& data_;
  const Kernels& k_;
  int local_batch_;
  ParamLayout layout_;
  std::vector<float> params_;
  std::unique_ptr<Gpt> model_;
  GradSync sync_;
  AdamW opt_;
  LrSchedule schedule_;
  BatchSampler sampler_;
  std::vector<int> inputs_, targets_;
  std::vector<size_t> canonical_offset_;  // per tensor
  int step_ = 0;
  float loss_ = 0;
};

// "12.34 MB" (10^6 bytes), as the reports print sizes.
std::string mb(double bytes);

// Throws TrainError when a checkpoint was written for a different model.
void check_checkpoint_matches(const CheckpointHeader& h, const Options& o);

}  // namespace strata::train
