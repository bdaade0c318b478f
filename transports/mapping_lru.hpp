// Which of a sender's allocations the receiver of a link holds mapped (PeerMappings: the
// ipc link's and the shm link's zero-copy): at most `capacity`, the least recently used
// evicted first. Both ends of an ipc link keep one and
// touch it with the same allocation ids in the same order (the transfers'), so the sender
// knows, without being told, when the receiver has let a mapping go and must be sent the
// allocation's handle again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>

namespace strata {

class MappingLru {
 public:
  explicit MappingLru(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  struct Touch {
    bool hit;          // the id was held: no handle travels
    uint64_t evicted;  // the id let go to make room (0: none)
  };
  // A transfer uses allocation `id` (never 0).
  Touch touch(uint64_t id);
  size_t size() const { return where_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::list<uint64_t> order_;  // most recently used first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

}  // namespace strata
