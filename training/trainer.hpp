// One training run on this rank: its part of the parameters (its pipeline chunks, its
// tensor-parallel piece of each), the model chunks and the pipeline that runs them,
// gradient synchronisation over the data-parallel ranks, the optimizer and the data
// position, and the operations main strings together (step, evaluate, sample, save, load).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "data.hpp"
#include "grad_sync.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "options.hpp"
#include "parallel_groups.hpp"
#include "pipeline.hpp"
#include "sharded_params.hpp"
#include "step_clock.hpp"
#include "step_grads.hpp"
#include "tensor_parallel.hpp"
#include "weights.hpp"

namespace strata::train {

struct StepResult {
  double loss;  // mean over the global batch
  double grad_norm;
  float lr;
  double time_s;       // the whole step on this rank
  double comm_wait_s;  // exposed communication (StepClock), and waiting for reductions
  double idle_s;       // waiting for a pipeline neighbour
  double gather_s;     // waiting for ZeRO-3's parameter gathers (on the host; 0 on a device)
  std::array<uint64_t, ParallelGroups::kTrafficKinds> bytes;  // issued in this step, per group
};

class Trainer {
 public:
  Trainer(const Options& o, ParallelGroups& groups, const TokenData& data, const Kernels& k);
  ~Trainer();

  int step() const { return step_; }  // optimizer steps completed
  StepResult train_step();
  double evaluate();  // collective: mean validation loss
  // Collective: text from the model, on rank 0 ("" elsewhere): bytes, or with another
  // vocabulary than 256 the token ids. Under model parallelism or ZeRO-3 the whole
  // parameters are gathered to rank 0 first.
  std::string sample(int len, uint64_t seed);

  // strata-train --on-failure shrink (training/trainer_shrink.cpp), after a rank of a pure
  // data-parallel zero-0 job failed, collective over the survivors: they shrink the job's
  // communicator, take the state of the survivor furthest on (one may have finished the
  // step the others failed in), and share the dead ranks' slices of every global batch.
  struct Recovery {
    int step;                 // optimizer steps completed; training goes on from the next
    int ranks;                // survivors
    std::vector<int> slices;  // of each global batch, on this rank
    int ahead;                // the survivor (new rank) whose state all took: it had completed the
                              // step the others failed in; -1 when they were all at one step
  };
  Recovery go_on_after_failure();

  // What a replica goes back to when an island is lost (DiLoCo, --on-failure continue):
  // this rank's parameters, Adam moments, step and data position, kept in memory.
  struct Kept {
    std::vector<float> params, m, v;
    int step = 0;
    BatchSampler sampler{0};
  };
  Kept keep() const;
  void restore(const Kept& k);
  // This rank's slice of the global batch changed (ParallelGroups::reslice, and o.batch):
  // DiLoCo lost an island or took one back.
  void reslice() { slices_ = {groups_.data_rank()}; }

  void save(const std::string& dir);  // collective; rank 0 writes
  // Throws TrainError when the checkpoint's model does not match this one.
  void load(const CheckpointReader& r);

  // Collective over the replica: calls emit(id, whole tensor) on rank 0 for every tensor of
  // the model in canonical order, assembled from `src` on the ranks that hold its pieces:
  // a buffer laid out as the parameters (sent by data-parallel rank 0), or with `sharded`
  // a moment buffer of this rank's ZeRO slices (sent by every data-parallel rank).
  void gather_whole(const float* src, bool sharded, const std::function<void(int, const float*)>& emit);
  // Fills a buffer laid out as this rank's flat parameter buffer, or with `sharded` as its
  // ZeRO slices (the parameters under ZeRO-3, the Adam moments under ZeRO 1-3), from
  // piece_of(id, piece), which writes this rank's piece of tensor `id`; padding is zero.
  // A bucket at a time: a shard is filled without the whole buffer.
  using PieceOf = std::function<void(int, float*)>;
  void fill(const PieceOf& piece_of, float* out, bool sharded) const;
  // The same into a buffer in the kernels' memory (on the host in place, so that no second
  // copy of it exists even for a moment).
  void fill(const PieceOf& piece_of, Buffer<float>& out, bool sharded) const;
  // piece_of from a canonical section (read(first, n, out): n floats from canonical index
  // `first`, as a checkpoint holds them).
  PieceOf pieces_of(const std::function<void(size_t, size_t, float*)>& read) const;

  const ParamLayout& layout() const { return layout_; }
  const Kernels& kernels() const { return k_; }  // where the parameters are
  // This rank's parameters, in the kernels' memory: the flat (padded) buffer, or under
  // ZeRO-3 its shard of it (layout().shard_size() floats).
  float* params() { return params_.data(); }
  size_t param_count() const { return params_.size(); }
  bool sharded() const { return o_.zero == 3; }
  CheckpointHeader checkpoint_header() const;  // this run's model, data position and step
  // Checksums of this rank's parameters (under ZeRO-3 collective: of the gathered ones).
  uint64_t param_checksum();
  uint64_t replicated_checksum();  // over its tensor-parallel replicated tensors
  // Over its piece of the tied embedding (the first stage's wte, the last stage's head).
  uint64_t embedding_checksum();
  std::string memory_report() const;
  int staging_peak() const { return sync_.staging_peak(); }
  uint64_t gathers() const { return sharded_ ? sharded_->gathers() : 0; }  // ZeRO-3's, so far
  int gathered_buffers() const { return sharded_ ? sharded_->buffers() : 0; }
  size_t activation_bytes() const { return pipe_->peak_activation_bytes(); }
  int microbatches_in_flight() const { return pipe_->peak_in_flight(); }

 private:
  bool reports_loss() const;  // the rank whose loss counts: last stage, tensor-parallel rank 0
  // This rank's parameters or a moment (Section), copied to the host.
  std::vector<float> host_copy(Section s) const;
  // This stage's pipeline over its chunks; loss_scale as in Pipeline::Shape.
  void build_pipeline(int microbatches, float loss_scale);
  // ZeRO-3: the layer groups the pipeline's next pass (a training step or an evaluation)
  // opens, planned for prefetching.
  void plan_gathers(bool evaluation);
  // FNV-1a over the tensors of this rank's flat parameter buffer that `which` picks, in
  // buffer order (under ZeRO-3 collective: each bucket gathered in turn).
  uint64_t checksum(const std::function<bool(const TensorInfo&)>& which);

  const Options& o_;
  ParallelGroups& groups_;
  const TokenData& data_;
  const Kernels& k_;
  int local_batch_, micro_batch_;
  StepClock clock_;
  TensorParallel tp_;
  ParamLayout layout_;
  Buffer<float> params_;  // in the kernels' memory, as everything the step computes on
  std::unique_ptr<Weights> weights_;  // where the chunks read params_: FlatWeights, or ShardedParams
  ShardedParams* sharded_ = nullptr;  // weights_ under ZeRO-3
  std::vector<std::unique_ptr<Gpt>> chunks_;
  GradSync sync_;
  StepGrads grads_;
  std::unique_ptr<Pipeline> pipe_;
  AdamW opt_;
  LrSchedule schedule_;
  BatchSampler sampler_;
  std::vector<int> inputs_, targets_;
  std::vector<size_t> canonical_offset_;  // per tensor, in the whole model
  int step_ = 0;
  float loss_ = 0;
  // The dp slices of each global batch this rank computes (its own, and after a shrink
  // those of dead ranks).
  std::vector<int> slices_;
  // The slices of each global batch this rank's replica computes per step: the
  // data-parallel ranks' at the start (a shrink deals them to the survivors, keeping the count).
  int replica_slices_;
  // The data position before the step in progress, which a shrink takes again.
  BatchSampler step_start_;
  bool mid_step_ = false;
};

// "12.34 MB" (10^6 bytes), as the reports print sizes.
std::string mb(double bytes);

// Throws TrainError when a checkpoint was written for a different model.
void check_checkpoint_matches(const CheckpointHeader& h, const Options& o);

// Gradient bucket size in elements (--bucket-mb).
size_t bucket_elems(const Options& o);
// What this rank holds: its tensor-parallel piece of the chunks of its pipeline stage.
ModelPartition partition_of(const Options& o, int tp_rank, int stage);
// The layout of that piece over `shards` data-parallel ranks (ZeRO-3: buckets of whole
// layer groups).
ParamLayout layout_of(const Options& o, int tp_rank, int stage, int shards);

}  // namespace strata::train
