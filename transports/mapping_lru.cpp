#include "transports/mapping_lru.hpp"

namespace strata {

MappingLru::Touch MappingLru::touch(uint64_t id) {
  if (auto it = where_.find(id); it != where_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    return {true, 0};
  }
  uint64_t evicted = 0;
  if (where_.size() == capacity_) {
    evicted = order_.back();
    where_.erase(evicted);
    order_.pop_back();
  }
  order_.push_front(id);
  where_[id] = order_.begin();
  return {false, evicted};
}

}  // namespace strata
