// A peer's allocations held mapped by the receiving side of a link that reads the peer's
// memory in place: the ipc link (device memory, mapped through the device backend) and the
// shm link's zero-copy (host memory, mapped from the peer's memfd). At most `capacity`,
// the least recently used evicted first (MappingLru, so an ipc sender can mirror it); an
// evicted mapping is unmapped once no receive still reads it (`last_use`: the receive that
// read it last; the ipc link's reads are stream tasks that finish later, the shm link's are
// over when the next receive starts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "transports/mapping_lru.hpp"

namespace strata {

class PeerMappings {
 public:
  struct Mapping {
    char* ptr;
    uint64_t length;
    uint64_t last_use;
  };
  explicit PeerMappings(size_t capacity) : lru_(capacity) {}

  // Allocation `id` for receive `seq`. `held` says whether it was mapped already; when it
  // was not, `map()` maps it (returning its address) after the least recently used one was
  // evicted to make room.
  template <class Map>
  const Mapping& use(uint64_t id, uint64_t length, uint64_t seq, bool& held, Map&& map) {
    const MappingLru::Touch t = lru_.touch(id);
    held = t.hit;
    if (t.evicted) {
      auto it = held_.find(t.evicted);
      retired_.push_back(it->second);
      held_.erase(it);
    }
    if (!t.hit) held_[id] = {map(), length, seq};
    Mapping& m = held_.at(id);
    m.last_use = seq;
    return m;
  }

  // Evicted mappings that no receive before `finished` reads go to `unmap`.
  template <class Unmap>
  void release(uint64_t finished, Unmap&& unmap) {
    for (size_t i = 0; i < retired_.size();) {
      if (retired_[i].last_use < finished) {
        unmap(retired_[i]);
        retired_[i] = retired_.back();
        retired_.pop_back();
      } else {
        ++i;
      }
    }
  }
  bool any_retired() const { return !retired_.empty(); }

  // Every mapping, held or evicted, to `unmap` (the link is going).
  template <class Unmap>
  void clear(Unmap&& unmap) {
    for (const auto& [id, m] : held_) unmap(m);
    for (const Mapping& m : retired_) unmap(m);
    held_.clear();
    retired_.clear();
  }
  bool empty() const { return held_.empty() && retired_.empty(); }
  size_t size() const { return held_.size() + retired_.size(); }  // evicted ones still in use included

 private:
  MappingLru lru_;
  std::unordered_map<uint64_t, Mapping> held_;  // by the peer's allocation id
  std::vector<Mapping> retired_;                // evicted, unmapped once no receive reads them
};

}  // namespace strata
