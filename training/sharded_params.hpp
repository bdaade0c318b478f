// ZeRO-3 (--zero 3, as PyTorch's FSDP): each data-parallel rank keeps only its shard of
// the parameters -- slice r of every bucket, the slices ZeRO-1/2 give it of the optimizer
// state -- and a layer group's whole parameters exist only while a pass reads them.
//
// Opening a group all-gathers its buckets from the shards into a buffer of its size from a
// small pool (a block's, the embeddings', the final LayerNorm's); closing it gives the
// buffer back, unless the next set of groups opened needs it too
// (the head's groups between a microbatch's forward and its backward). The passes of a
// step are planned (plan(): the sets the model will open, in order), so opening set k also
// issues the gathers of the sets k+1 .. k+prefetch that are not there yet, on the
// communicator's non-blocking forms: they run while set k computes, and only what they did
// not hide is waited for (StepClock::gather). A group open now and needed again later than
// the next set is gathered again then, never twice at once.
//
// On the host a gather is Comm::all_gather_async and opening waits for its Request. On a
// device a gather is the communicator's stream form on a gather stream of its own: it waits
// for the training stream as it was when the gather was issued (so for the compute that
// last read its buffer, and for the optimizer's update of the shard), and the training
// stream waits for the gather (an event) before the group's compute; the host waits for
// neither.
#pragma once

#include <map>
#include <vector>

#include "device/buffer.hpp"
#include "ground/device/execution.hpp"
#include "group.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "step_clock.hpp"
#include "weights.hpp"

namespace strata::train {

class ShardedParams final : public Weights {
 public:
  // `shard`: this rank's slices (layout.shard_size() floats in k's memory), which the
  // optimizer updates; `layout` has group_buckets. `prefetch`: sets gathered ahead.
  ShardedParams(Group& dp, const ParamLayout& layout, const float* shard, const Kernels& k, int prefetch,
                StepClock& clock);
  ~ShardedParams() override;
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  // The sets the next passes open, in order (the pool grows here to what they need at
  // once, so that nothing is allocated while gathers run), from nothing gathered. Throws
  // std::logic_error when a pass of the last plan is still open.
  void plan(WeightUses uses);
  // Throws std::logic_error when `groups` is not the plan's next set.
  void open(const std::vector<int>& groups) override;
  void close() override;
  const float* tensor(int id) const override;

  int buffers() const { return static_cast<int>(slots_.size()); }  // in the pool
  size_t buffer_bytes() const;
  uint64_t gathers() const { return gathers_; }  // group gathers issued so far

  // The groups to gather when set k of `uses` opens (those of sets k .. k+ahead not in
  // `resident`, in the order needed), and those to let go when it closes (not in set k+1).
  static std::vector<int> to_gather(const WeightUses& uses, size_t k, int ahead, const std::vector<char>& resident);
  static std::vector<int> to_release(const WeightUses& uses, size_t k);
  // The pool `uses` needs: for each size of group (floats, by group in `group_floats`),
  // the most groups of that size resident at once.
  static std::map<size_t, int> buffers_needed(const WeightUses& uses, int ahead, const std::vector<size_t>& group_floats);

 private:
  struct Slot {
    Buffer<float> buf;  // of one group size
    std::vector<strata::Request> pending;  // host: the gather's requests
    strata::device::Event gathered = nullptr;  // device: recorded on the gather stream after it
  };
  void gather(int group);
  void wait(int group);

  Group& dp_;
  const ParamLayout& layout_;
  const float* shard_;
  const Kernels& k_;
  int prefetch_;
  StepClock& clock_;
  WeightUses uses_;
  size_t next_ = 0;                // the next set of uses_ to open
  std::vector<int> open_;          // the set open now
  std::vector<int> slot_of_;       // by group: its slot, -1 when not gathered
  std::vector<Slot> slots_;
  std::vector<int> free_;
  uint64_t gathers_ = 0;
  // On a device: the backend's execution, the gather stream, and an event recorded on the
  // training stream as each gather is issued.
  strata::device::Execution* ex_ = nullptr;
  strata::device::Stream stream_ = nullptr;
  strata::device::Event issued_ = nullptr;
};

}  // namespace strata::train
