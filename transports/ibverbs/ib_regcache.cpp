#include "transports/ibverbs/ib_regcache.hpp"

#include "strata/error.hpp"

namespace strata::ibverbs {

RegCache::~RegCache() {
  for (const Region& r : list_) dereg_(r);
}

const Region& RegCache::acquire(const void* addr, size_t len) {
  uintptr_t b = reinterpret_cast<uintptr_t>(addr), e = b + (len ? len : 1);
  for (auto it = list_.begin(); it != list_.end(); ++it) {
    if (it->begin <= b && e <= it->end) {
      ++it->refs;
      ++hits_;
      list_.splice(list_.begin(), list_, it);
      return list_.front();
    }
  }
  uintptr_t pb = b & ~(uintptr_t(page_) - 1), pe = (e + page_ - 1) & ~(uintptr_t(page_) - 1);
  Region r = reg_(reinterpret_cast<void*>(pb), pe - pb);
  r.begin = pb;
  r.end = pe;
  r.refs = 1;
  ++registrations_;
  cached_bytes_ += pe - pb;
  list_.push_front(r);
  evict();
  return list_.front();
}

void RegCache::release(const Region& r) {
  for (Region& x : list_)
    if (&x == &r) {
      if (x.refs <= 0) throw InternalError("ibverbs: registration released more often than acquired");
      --x.refs;
      evict();
      return;
    }
  throw InternalError("ibverbs: releasing a registration the cache does not hold");
}

int RegCache::invalidate(const void* addr, size_t len) {
  uintptr_t b = reinterpret_cast<uintptr_t>(addr), e = b + len;
  int dropped = 0;
  for (auto it = list_.begin(); it != list_.end();) {
    if (it->refs == 0 && it->begin < e && b < it->end) {
      dereg_(*it);
      cached_bytes_ -= it->end - it->begin;
      it = list_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

void RegCache::evict() {
  for (auto it = list_.end(); cached_bytes_ > max_cached_ && it != list_.begin();) {
    --it;
    if (it->refs == 0) {
      dereg_(*it);
      cached_bytes_ -= it->end - it->begin;
      it = list_.erase(it);
    }
  }
}

}  // namespace strata::ibverbs
