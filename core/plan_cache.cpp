#include "core/plan_cache.hpp"

namespace strata {

std::map<PlanCache::Key, CachedPlan>::iterator PlanCache::insert(const Key& key, Plan plan) {
  if (plans_.size() >= kMaxPlans) {
    plans_.clear();
    last_ = nullptr;
  }
  return plans_.emplace(key, CachedPlan{std::move(plan), nullptr}).first;
}

}  // namespace strata
