#include "core/plan_cache.hpp"

namespace strata {

std::map<PlanCache::Key, CachedPlan>::iterator PlanCache::insert(const Key& key, Plan plan) {
  if (plans_.size() >= kMaxPlans) {
    plans_.clear();
    last_ = nullptr;
  }
  return plans_.emplace(key, CachedPlan{std::move(plan), nullptr}).first;
}

std::unique_ptr<PlanSlot>& PlanCache::group_slot(size_t bytes, bool* first) {
  auto it = group_slots_.find(bytes);
  if (first) *first = it == group_slots_.end();
  if (it != group_slots_.end()) return it->second;
  if (group_slots_.size() >= kMaxPlans) group_slots_.clear();
  return group_slots_[bytes];
}

}  // namespace strata
