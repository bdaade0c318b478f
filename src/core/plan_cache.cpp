#include "core/plan_cache.hpp"

namespace strata {

std::map<PlanCache::Key, CachedPlan>::iterator PlanCache::insert(const Key& key, Plan plan) {
  if (plans_.size() >= kMaxPlans) {
    plans_.clear();
    last_ = nullptr;
  }
  return plans_.emplace(key, CachedPlan{std::move(plan), nullptr}).first;
}

std::unique_ptr<PlanSlot>& PlanCache::group_slot(size_t bytes) {
  if (group_slots_.size() >= kMaxPlans && !group_slots_.count(bytes)) group_slots_.clear();
  return group_slots_[bytes];
}

}  // namespace strata
