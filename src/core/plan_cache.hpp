// Plans by call: a training loop repeats the same few calls, so each distinct call's plan
// is built once. Beside each plan sits the executor's opaque per-plan slot. Grouped
// send/receive plans are built per call (their addresses are in the plan), so only their
// slots are kept, by the bytes the group sends.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "ground/call.hpp"
#include "ground/plan.hpp"

namespace strata {

struct CachedPlan {
  Plan plan;
  std::unique_ptr<PlanSlot> slot;  // the executor's; empty until it wants one
};

class PlanCache {
 public:
  // What makes two calls share a plan. `forward`: the plan may forward reductions (every
  // rank of the call sees the same value).
  struct Key {
    Collective coll;
    size_t count;
    size_t elem_size;
    int root;
    bool in_place;
    bool forward;
    MemoryKind memory;
    auto tie() const { return std::tie(coll, count, elem_size, root, in_place, forward, memory); }
    bool operator==(const Key& o) const { return tie() == o.tie(); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  static Key key_of(const Call& call, bool forward) {
    return {call.coll, call.count, size_of(call.type), call.root, call.in_place, forward, call.memory};
  }

  // The plan for `key`, built by `build()` the first time. A template: the per-call
  // path allocates nothing.
  template <class Build>
  CachedPlan& get(const Key& key, const Build& build) {
    if (last_ && key == last_key_) return *last_;
    auto it = plans_.find(key);
    if (it == plans_.end()) it = insert(key, build());
    last_key_ = key;
    return *(last_ = &it->second);
  }
  // The slot of grouped send/receive calls that send `bytes`. Looked up by the running
  // operation only (operations run one at a time), so clearing old slots is safe.
  // `first`, when given, says whether no group of this many bytes has run since the slots
  // were last cleared.
  std::unique_ptr<PlanSlot>& group_slot(size_t bytes, bool* first = nullptr);

  // Plans, and group slots, kept at most: size sweeps should not grow them forever.
  static constexpr size_t kMaxPlans = 256;
  size_t plans_kept() const { return plans_.size(); }
  size_t group_slots_kept() const { return group_slots_.size(); }

 private:
  std::map<Key, CachedPlan>::iterator insert(const Key& key, Plan plan);

  std::map<Key, CachedPlan> plans_;
  // The last plan used: a loop repeating one call skips the map search.
  Key last_key_{};
  CachedPlan* last_ = nullptr;
  std::map<size_t, std::unique_ptr<PlanSlot>> group_slots_;
};

}  // namespace strata
