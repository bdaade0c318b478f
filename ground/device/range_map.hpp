// Allocations by address range: which allocation holds a pointer. Thread-safe (lookups
// share a lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <utility>

namespace strata::device {

template <typename V>
class RangeMap {
 public:
  void insert(const void* base, size_t length, V value) {
    std::unique_lock lk(m_);
    ranges_.insert_or_assign(key(base), Entry{length, std::move(value)});
  }

  // The value whose [base, base + length) holds p.
  std::optional<V> find(const void* p) const {
    std::shared_lock lk(m_);
    auto it = ranges_.upper_bound(key(p));
    if (it == ranges_.begin()) return std::nullopt;
    --it;
    if (key(p) - it->first >= it->second.length) return std::nullopt;
    return it->second.value;
  }

  // Removes the range that starts exactly at base (nullopt: none does).
  std::optional<V> erase(const void* base) {
    std::unique_lock lk(m_);
    auto it = ranges_.find(key(base));
    if (it == ranges_.end()) return std::nullopt;
    V v = std::move(it->second.value);
    ranges_.erase(it);
    return v;
  }

 private:
  struct Entry {
    size_t length;
    V value;
  };
  static uintptr_t key(const void* p) { return reinterpret_cast<uintptr_t>(p); }

  mutable std::shared_mutex m_;
  std::map<uintptr_t, Entry> ranges_;
};

}  // namespace strata::device
