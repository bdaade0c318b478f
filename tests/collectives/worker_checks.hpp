// strata-test-worker's checks: results, buffers with guard bytes, first-mismatch reports
// and raw-byte messages. Independent of the library: this is the oracle's side.
#pragma once

#include <strata/strata.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_values.hpp"

namespace strata_test {

using namespace strata;

inline int g_max_print = 10;
inline bool g_verbose = false;

inline double mono_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------- results
struct Reporter {
  int rank = 0, n = 1;
  long passed = 0, failed = 0, printed = 0;
  void ok() { ++passed; }
  void fail(const std::string& desc, const std::string& why) {
    ++failed;
    if (printed++ < g_max_print) {
      fprintf(stderr, "FAIL rank %d/%d: %s: %s\n", rank, n, desc.c_str(), why.c_str());
      fflush(stderr);
    } else if (printed == g_max_print + 1) {
      fprintf(stderr, "rank %d: (further failures not printed)\n", rank);
    }
  }
  void result(const std::string& desc, const std::string& why) {
    if (why.empty()) {
      ok();
      if (g_verbose) printf("ok %s\n", desc.c_str());
    } else {
      fail(desc, why);
    }
  }
};
inline Reporter g_rep;

// ---------------------------------------------------------------- buffers
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kSentinel = 0xC3;

// Host buffer with guard bytes on both sides, to catch writes out of bounds.
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t bytes) { alloc(bytes); }
  ~Buf() { std::free(raw_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept : raw_(o.raw_), bytes_(o.bytes_) { o.raw_ = nullptr; }
  void alloc(size_t bytes) {
    std::free(raw_);
    raw_ = nullptr;
    bytes_ = bytes;
    if (posix_memalign(&raw_, 64, bytes + 2 * kGuard) != 0) {
      fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
      exit(3);
    }
    std::memset(raw_, kGuardByte, kGuard);
    std::memset(data() + bytes, kGuardByte, kGuard);
  }
  bool allocated() const { return raw_ != nullptr; }
  uint8_t* data() const { return static_cast<uint8_t*>(raw_) + kGuard; }
  template <class S>
  S* as() const {
    return reinterpret_cast<S*>(data());
  }
  size_t bytes() const { return bytes_; }
  void fill_sentinel() { std::memset(data(), kSentinel, bytes_); }
  bool guards_ok() const {
    if (!raw_) return true;
    const uint8_t* p = static_cast<const uint8_t*>(raw_);
    for (size_t i = 0; i < kGuard; ++i)
      if (p[i] != kGuardByte || p[kGuard + bytes_ + i] != kGuardByte) return false;
    return true;
  }
  // Index of the first byte that is not the sentinel, or SIZE_MAX.
  size_t first_non_sentinel(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (data()[i] != kSentinel) return i;
    return SIZE_MAX;
  }

 private:
  void* raw_ = nullptr;
  size_t bytes_ = 0;
};

// Collects the first mismatch of a check.
struct Bad {
  size_t first = SIZE_MAX, count = 0;
  std::string got, exp, where;
  bool any() const { return count > 0; }
  template <class G, class E>
  void note(size_t i, G got_fn, E exp_fn) {
    if (count++ == 0) {
      first = i;
      got = got_fn();
      exp = exp_fn();
    }
  }
  std::string str(const std::string& what) const {
    std::ostringstream o;
    o << what << ": first bad index " << first << " (" << count << " bad): got " << got
      << " expected " << exp;
    return o.str();
  }
};


// Raw-byte message helpers for point-to-point tests.
inline void fill_raw(Buf& b, uint64_t base) {
  uint8_t* p = b.data();
  size_t i = 0, n = b.bytes();
  for (; i + 8 <= n; i += 8) {
    uint64_t h = mix64(base + i / 8);
    std::memcpy(p + i, &h, 8);
  }
  if (i < n) {
    uint64_t h = mix64(base + i / 8);
    std::memcpy(p + i, &h, n - i);
  }
}
inline std::string check_raw(const Buf& got, uint64_t base, size_t elem_size, const char* what) {
  if (!got.guards_ok()) return std::string("guard bytes overwritten around ") + what;
  Buf ref(got.bytes());
  fill_raw(ref, base);
  for (size_t i = 0; i < got.bytes(); ++i)
    if (got.data()[i] != ref.data()[i]) {
      char b[200];
      snprintf(b, sizeof b, "%s: first bad element %zu (byte %zu of %zu): got 0x%02x expected 0x%02x",
               what, i / elem_size, i, got.bytes(), got.data()[i], ref.data()[i]);
      return b;
    }
  return {};
}
inline uint64_t msg_base(uint64_t seed, int src, int dst, int k) {
  return mix64(seed ^ mix64((uint64_t(src) << 40) ^ (uint64_t(dst) << 20) ^ uint64_t(k)));
}

template <class F>
void guarded(const std::string& desc, F f) {
  try {
    f();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL rank %d/%d: %s: threw %s\n", g_rep.rank, g_rep.n, desc.c_str(), e.what());
    exit(2);
  }
}


}  // namespace strata_test
