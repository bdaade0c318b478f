// Registration cache: memory regions registered with a NIC, by address range, so that a
// buffer is registered once (page-aligned, covering it) and found again afterwards.
// Registration is done by callbacks (ibv_reg_mr / ibv_dereg_mr in the transport, fakes in
// the tests). Regions nobody holds stay cached until invalidated, evicted (beyond
// `max_cached_bytes`, least recently used first) or the cache is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>

namespace strata::ibverbs {

struct Region {
  uintptr_t begin = 0, end = 0;  // page-aligned range [begin, end)
  uint32_t lkey = 0, rkey = 0;
  void* handle = nullptr;  // ibv_mr*
  int refs = 0;
};

class RegCache {
 public:
  using RegisterFn = std::function<Region(void* addr, size_t len)>;  // fills keys and handle
  using DeregisterFn = std::function<void(const Region&)>;

  RegCache(RegisterFn reg, DeregisterFn dereg, size_t max_cached_bytes = size_t(1) << 30, size_t page = 4096)
      : reg_(std::move(reg)), dereg_(std::move(dereg)), max_cached_(max_cached_bytes), page_(page) {}
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;
  ~RegCache();

  // A region covering [addr, addr + len), held until release(). Registers only on a miss.
  const Region& acquire(const void* addr, size_t len);
  void release(const Region& r);
  // Forgets (deregisters) unheld regions overlapping [addr, addr + len): call before that
  // memory is freed. Returns how many were dropped; held ones are left alone.
  int invalidate(const void* addr, size_t len);

  size_t regions() const { return list_.size(); }
  size_t registrations() const { return registrations_; }
  size_t hits() const { return hits_; }

 private:
  void evict();
  RegisterFn reg_;
  DeregisterFn dereg_;
  size_t max_cached_, page_;
  std::list<Region> list_;  // most recently used first; stable addresses
  size_t cached_bytes_ = 0, registrations_ = 0, hits_ = 0;
};

}  // namespace strata::ibverbs
