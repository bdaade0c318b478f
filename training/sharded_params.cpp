#include "sharded_params.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ground/device/backend.hpp"

namespace strata::train {
namespace {

bool in(const std::vector<int>& set, int g) { return std::find(set.begin(), set.end(), g) != set.end(); }

}  // namespace

std::vector<int> ShardedParams::to_gather(const WeightUses& uses, size_t k, int ahead,
                                          const std::vector<char>& resident) {
  std::vector<int> out;
  for (size_t j = k; j < uses.size() && j <= k + static_cast<size_t>(ahead); ++j)
    for (int g : uses[j])
      if (!resident[g] && !in(out, g)) out.push_back(g);
  return out;
}

std::vector<int> ShardedParams::to_release(const WeightUses& uses, size_t k) {
  std::vector<int> out;
  for (int g : uses[k])
    if (k + 1 >= uses.size() || !in(uses[k + 1], g)) out.push_back(g);
  return out;
}

std::map<size_t, int> ShardedParams::buffers_needed(const WeightUses& uses, int ahead,
                                                    const std::vector<size_t>& group_floats) {
  std::vector<char> resident(group_floats.size(), 0);
  std::map<size_t, int> now, peak;
  for (size_t k = 0; k < uses.size(); ++k) {
    for (int g : to_gather(uses, k, ahead, resident)) {
      resident[g] = 1;
      peak[group_floats[g]] = std::max(peak[group_floats[g]], ++now[group_floats[g]]);
    }
    for (int g : to_release(uses, k)) resident[g] = 0, --now[group_floats[g]];
  }
  return peak;
}

size_t ShardedParams::buffer_bytes() const {
  size_t n = 0;
  for (const Slot& s : slots_) n += s.buf.bytes();
  return n;
}

ShardedParams::ShardedParams(Group& dp, const ParamLayout& layout, const float* shard, const Kernels& k,
                             int prefetch, StepClock& clock)
    : dp_(dp), layout_(layout), shard_(shard), k_(k), prefetch_(prefetch), clock_(clock) {
  slot_of_.assign(layer_groups(layout.config()), -1);
  if (k.stream()) {
    ex_ = &strata::device::require_backend("ZeRO-3's gathers").execution();
    stream_ = ex_->stream_create();
    issued_ = ex_->event_create();
  }
}

ShardedParams::~ShardedParams() {
  if (!ex_) return;
  ex_->stream_destroy(stream_);  // waits for the gathers on it
  ex_->event_destroy(issued_);
  for (Slot& s : slots_) ex_->event_destroy(s.gathered);
}

void ShardedParams::plan(WeightUses uses) {
  if (!open_.empty()) throw std::logic_error("ZeRO-3: a new plan while a pass has groups open");
  // A pass ends with nothing gathered; one a failure interrupted may leave groups gathered
  // ahead (stale once the shard changes): they go, their gathers waited out first.
  for (size_t g = 0; g < slot_of_.size(); ++g) {
    if (slot_of_[g] < 0) continue;
    for (strata::Request& r : slots_[slot_of_[g]].pending) {
      try {
        r.wait();
      } catch (const std::exception&) {  // the failure that interrupted the pass
      }
    }
    slots_[slot_of_[g]].pending.clear();
    free_.push_back(slot_of_[g]);
    slot_of_[g] = -1;
  }
  std::vector<size_t> floats;
  for (int g = 0; g < layer_groups(layout_.config()); ++g) floats.push_back(layout_.group_span(g).padded);
  for (const auto& [size, need] : buffers_needed(uses, prefetch_, floats)) {
    int have = 0;
    for (const Slot& s : slots_) have += s.buf.size() == size;
    for (; have < need; ++have) {
      Slot s;
      s.buf = Buffer<float>(k_, size);
      if (ex_) s.gathered = ex_->event_create();
      slots_.push_back(std::move(s));
      free_.push_back(static_cast<int>(slots_.size()) - 1);
    }
  }
  uses_ = std::move(uses);
  next_ = 0;
}

void ShardedParams::gather(int group) {
  const GroupSpan& span = layout_.group_span(group);
  const auto fits = std::find_if(free_.begin(), free_.end(), [&](int i) { return slots_[i].buf.size() == span.padded; });
  if (fits == free_.end()) throw std::logic_error("ZeRO-3: no free buffer for a gather (the plan was not followed)");
  const int s = *fits;
  free_.erase(fits);
  slot_of_[group] = s;
  Slot& slot = slots_[s];
  if (ex_) {
    // After what the training stream has queued so far: the last reads of this buffer,
    // and the optimizer's update of the shard.
    ex_->event_record(issued_, k_.stream());
    ex_->stream_wait(stream_, issued_);
  }
  for (int b = span.first_bucket; b < span.end_bucket; ++b) {
    const Bucket& bucket = layout_.buckets()[b];
    const size_t n = layout_.slice(bucket);
    strata::Request r = dp_.all_gather(shard_ + bucket.shard_offset, slot.buf.data() + (bucket.offset - span.offset), n,
                                       stream_);
    if (!ex_) slot.pending.push_back(std::move(r));
  }
  if (ex_) ex_->event_record(slot.gathered, stream_);
  ++gathers_;
}

void ShardedParams::wait(int group) {
  Slot& slot = slots_[slot_of_[group]];
  if (ex_) {
    ex_->stream_wait(k_.stream(), slot.gathered);
    return;
  }
  if (slot.pending.empty()) return;
  clock_.gather([&] {
    for (strata::Request& r : slot.pending) r.wait();
  });
  slot.pending.clear();
}

void ShardedParams::open(const std::vector<int>& groups) {
  if (!open_.empty()) throw std::logic_error("ZeRO-3: groups opened while others are open");
  if (next_ >= uses_.size() || uses_[next_] != groups)
    throw std::logic_error("ZeRO-3: layer groups opened out of the planned order (set " + std::to_string(next_) +
                           " of " + std::to_string(uses_.size()) + ")");
  std::vector<char> resident(slot_of_.size());
  for (size_t g = 0; g < slot_of_.size(); ++g) resident[g] = slot_of_[g] >= 0;
  for (int g : to_gather(uses_, next_, prefetch_, resident)) gather(g);
  for (int g : groups) wait(g);
  open_ = groups;
}

void ShardedParams::close() {
  for (int g : to_release(uses_, next_)) {
    free_.push_back(slot_of_[g]);
    slot_of_[g] = -1;
  }
  open_.clear();
  ++next_;
}

const float* ShardedParams::tensor(int id) const {
  const int g = layer_group(layout_.config(), id);
  if (!in(open_, g)) throw std::logic_error("ZeRO-3: " + layout_.tensor(id).name + " read while its group is not open");
  return slots_[slot_of_[g]].buf.data() + (layout_.tensor(id).offset - layout_.group_span(g).offset);
}

}  // namespace strata::train
