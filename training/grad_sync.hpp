// Data-parallel gradient synchronisation, overlapped with backward, for the four modes:
//
//   zero 0  every rank keeps the whole gradient; each bucket is all-reduced (avg) as soon
//           as backward has finished it; every rank then updates every parameter.
//   zero 1  every rank keeps the whole gradient buffer, but each bucket is reduce-scattered:
//           rank r ends up with the averaged slice r, updates only those parameters (its
//           shard of the moments), and the updated slices are all-gathered.
//   zero 2  as zero 1, but backward writes each bucket into a staging buffer from a small
//           pool; after its reduce-scatter only this rank's slice is kept, so the full
//           gradient never exists at once.
//   zero 3  the gradients as zero 2; the parameters are sharded too (sharded_params.hpp),
//           so the optimizer updates this rank's shard and nothing is gathered after it.
//
// Buckets go out in the order backward completes them (last layer first); collectives
// on a communicator run in issue order, so waiting on the oldest frees staging first.
//
// --grad-dtype bf16: each bucket is rounded to bf16 into a wire buffer, summed over the
// ranks in bf16 (the library adds in fp32 and rounds each sum once), and cast back to
// fp32 times 1/ranks into where the fp32 reduction would have put it; on a device all
// three are queued on the training stream at once.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <vector>

#include "device/buffer.hpp"
#include "group.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "model.hpp"

namespace strata::train {

class GradSync final : public GradSink {
 public:
  // Gradients live in k's memory. staging_buffers: the zero-2 pool size to aim for (more
  // are made only when backward needs another buffer while no reduction is in flight to
  // free one).
  GradSync(Group& group, const ParamLayout& layout, int zero, const Kernels& k, int staging_buffers = 3);

  // Reduce the gradients in bf16 (--grad-dtype bf16) rather than fp32.
  void reduce_in_bf16(bool on) { bf16_ = on; }
  void begin_step();
  // After a failure: waits out what is in flight (it has failed), and, zero 0 only (its
  // layout does not depend on the rank count), reduces over `group` from now on.
  void abandon();
  void rebind(Group& group);
  float* grad(int tensor) override;
  void ready_from(int tensor) override;
  // Launches what is left and waits for every reduction of this step.
  void finish();

  // The optimizer's view after finish(): its segments, and the gradient they index.
  const std::vector<Segment>& segments() const { return segments_; }
  const float* grads() const { return zero_ >= 2 ? shard_.data() : full_.data(); }
  size_t state_size() const { return zero_ == 0 ? layout_.padded_size() : layout_.shard_size(); }
  // Sum of squares of the averaged gradient over the parameters this rank's data-parallel
  // group holds and counts (TensorInfo::counted; padding holds zeros): over all of them
  // (zero 1, 2: the group's slices summed), or this rank's copy (zero 0).
  double norm_squared(const Kernels& k);
  double global_norm(const Kernels& k) { return std::sqrt(norm_squared(k)); }
  // zero 1, 2: after the optimizer, every rank's updated slices go to every rank.
  void gather_params(float* params);

  size_t grad_bytes() const;  // gradient memory held now
  size_t staging_bytes() const { return pool_.size() * layout_.max_bucket() * sizeof(float); }
  int staging_peak() const { return static_cast<int>(pool_.size()); }

 private:
  struct InFlight {
    strata::Request req;
    int staging = -1;  // pool buffer to free when it completes (zero 2)
    // bf16: the wire buffer, and the reduced elements in it to cast back into `back`.
    int wire = -1;
    const uint16_t* reduced = nullptr;
    float* back = nullptr;
    size_t len = 0;
  };
  void launch(int bucket);
  int acquire();
  void retire_oldest();
  void retire_done();  // those already complete, oldest first

  Group* group_;
  const ParamLayout& layout_;
  int zero_;
  int staging_target_;
  std::vector<Segment> segments_;

  const Kernels& k_;
  Buffer<float> full_;   // zero 0/1: whole (padded) gradient
  Buffer<float> shard_;  // zero 2: this rank's slices, in shard order
  std::vector<Buffer<float>> pool_;
  std::vector<int> free_;
  std::vector<int> staging_of_;  // per bucket, -1 when none
  int next_bucket_ = -1;         // highest bucket not yet launched
  std::deque<InFlight> inflight_;
  bool bf16_ = false;
  std::vector<Buffer<uint16_t>> wire_;  // bf16: one per bucket in flight
  std::vector<int> wire_free_;
};

}  // namespace strata::train
