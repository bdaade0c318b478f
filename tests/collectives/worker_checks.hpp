// strata-test-worker's checks: the tally of results, host buffers with guard bytes, and
// the serial reference every collective is compared with. The reference is computed here
// from the deterministic inputs and written-out buffer sizes, independently of the library
// (only its public call types are used), so that it can catch the library being wrong.
#pragma once

#include <strata/collective.hpp>
#include <strata/device.hpp>
#include <strata/strata.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_values.hpp"

namespace strata_test {

// Seconds on CLOCK_MONOTONIC (shared by all processes on the host).
double mono_s();

// ---------------------------------------------------------------- results
// Counts this rank's passed and failed cases and prints the first failures.
struct Reporter {
  int rank = 0, n = 1;
  int max_print = 10;    // failures printed in full
  bool verbose = false;  // print "ok <case>" for every pass
  long passed = 0, failed = 0, printed = 0;
  void fail(const std::string& desc, const std::string& why);
  // `why` is empty when the case passed.
  void result(const std::string& desc, const std::string& why);
};

// Runs `f`; a library exception ends the program with status 2 (the ranks are out of step).
template <class F>
void guarded(const Reporter& rep, const std::string& desc, F f) {
  try {
    f();
  } catch (const strata::Error& e) {
    fprintf(stderr, "FAIL rank %d/%d: %s: threw %s\n", rep.rank, rep.n, desc.c_str(), e.what());
    exit(2);
  }
}

// ---------------------------------------------------------------- device mode
// --device: every buffer the library sees is device memory (strata::alloc), the twin of a
// host buffer in pinned memory that the checks read. A call's buffers are copied in just
// before it and out just after it on the call's own stream, with no synchronisation in
// between, so a call that is not ordered on its stream reads stale inputs or has its
// output read before it wrote it (reliably so with STRATA_EMULATED_DELAY_US on).
struct DeviceMode {
  bool on = false;
  strata::device::Stream stream = nullptr;  // the worker's stream (nullptr: the default one)
  // Device buffers lie inside allocations of the program's own (ProgramCalls::device_malloc:
  // PyTorch's cudaMalloc segments, which Strata stages), 256 bytes past their start.
  bool foreign = false;
};
DeviceMode& device_mode();

// --alloc: how this rank's host buffers are allocated (zero-copy on shared memory reads
// peers' shareable buffers directly; ranks may differ). user: posix_memalign (private,
// the FIFO path). strata: strata::alloc(host). registered: a memfd mapped MAP_SHARED,
// registered with `comm` (deregistered and unmapped when freed, peers may still map it).
struct AllocMode {
  enum Kind { user, strata, registered } kind = user;
  strata::Comm* comm = nullptr;
};
AllocMode& alloc_mode();

// ---------------------------------------------------------------- buffers
// Host buffer with guard bytes on both sides, to catch writes out of bounds. In device
// mode it has a device twin of the same layout (guards included).
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t bytes) { alloc(bytes); }
  ~Buf() { release(); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept
      : raw_(o.raw_), dev_(o.dev_), segment_(o.segment_), bytes_(o.bytes_), kind_(o.kind_), handle_(o.handle_), fd_(o.fd_),
        mapped_(o.mapped_) {
    o.raw_ = o.dev_ = o.segment_ = o.handle_ = nullptr;
    o.fd_ = -1;
  }
  void alloc(size_t bytes);
  // The twin's address of `p`, a pointer into this buffer (null stays null); `p` itself
  // when not in device mode.
  void* on_device(const void* p) const;
  bool holds(const void* p) const {
    return raw_ && p >= raw_ && p < static_cast<const uint8_t*>(raw_) + bytes_ + 2 * kGuard;
  }
  // Device mode: the whole buffer to its twin, or back, queued on `s`.
  void to_device(strata::device::Stream s) const;
  void to_host(strata::device::Stream s);
  bool allocated() const { return raw_ != nullptr; }
  uint8_t* data() const { return static_cast<uint8_t*>(raw_) + kGuard; }
  template <class S>
  S* as() const {
    return reinterpret_cast<S*>(data());
  }
  size_t bytes() const { return bytes_; }
  void fill_sentinel();
  bool guards_ok() const;
  // Index of the first byte that is not the sentinel, or SIZE_MAX.
  size_t first_non_sentinel(size_t from, size_t to) const;

 private:
  static constexpr size_t kGuard = 64;
  static constexpr size_t kForeignOffset = 256;
  void release();
  void* raw_ = nullptr;
  void* dev_ = nullptr;  // device mode: the twin
  void* segment_ = nullptr;  // --foreign: the program's allocation holding dev_
  size_t bytes_ = 0;
  AllocMode::Kind kind_ = AllocMode::user;
  void* handle_ = nullptr;  // registered: the registration
  int fd_ = -1;             // registered: the memfd
  size_t mapped_ = 0;       // registered: bytes mapped
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
  std::string str(const std::string& what) const;
};

// ---------------------------------------------------------------- raw messages
// Point-to-point payloads: bytes generated from `base`, compared byte for byte.
void fill_raw(Buf& b, uint64_t base);
std::string check_raw(const Buf& got, uint64_t base, size_t elem_size, const char* what);
uint64_t msg_base(uint64_t seed, int src, int dst, int k);

// ---------------------------------------------------------------- collectives
// One rank's call of a collective, as far as its result depends on it.
struct CollCall {
  strata::Collective coll;
  strata::ReduceOp op;
  size_t count;
  bool inplace;
  int root;
  int rank, n;
  uint64_t seed;
};

// The inputs every rank contributes to a call and the serial reference for its result.
template <strata::DataType D>
class Expected {
  using T = TT<D>;
  using S = typename T::S;
  using C = typename T::C;

 public:
  explicit Expected(const CollCall& call) : k_(call), bases_(call.n) {
    for (int r = 0; r < k_.n; ++r) bases_[r] = rank_base(k_.seed, r);
  }

  // Element i of rank r's input.
  S in(int r, size_t i) const {
    uint64_t h = mix64(bases_[r] + i);
    if (reducing()) return gen_reduce_input<D>(k_.op, h, r, k_.n);
    return gen_raw<S>(h);
  }

  // Empty when this rank's buffers hold what they must after the call: `send` is the send
  // (or in-place) buffer, `recv_buf` a separate output (unallocated when there is none),
  // `recv` the recv pointer that was passed.
  std::string check(const Buf& send, const Buf& recv_buf, const void* recv) const {
    using strata::Collective;
    if (!send.guards_ok()) return "guard bytes around the send/in-place buffer were overwritten";
    if (!recv_buf.guards_ok()) return "guard bytes around the recv buffer were overwritten";
    const size_t c = k_.count, nc = static_cast<size_t>(k_.n) * k_.count;
    const int rank = k_.rank, n = k_.n;
    Bad bad;
    // An out-of-place send buffer must be left as it was.
    if (!k_.inplace) {
      size_t elems = (k_.coll == Collective::reduce_scatter || k_.coll == Collective::all_to_all) ? nc : c;
      verify_copy(send.as<S>(), elems, rank, 0, 0, bad);
      if (bad.any()) return bad.str("send buffer was modified");
    }
    const S* out = static_cast<const S*>(recv);
    switch (k_.coll) {
      case Collective::all_reduce:
        verify_reduction(out, c, 0, bad);
        break;
      case Collective::reduce_scatter:
        verify_reduction(out, c, static_cast<size_t>(rank) * c, bad);
        break;
      case Collective::reduce:
        if (rank == k_.root) {
          verify_reduction(out, c, 0, bad);
        } else if (k_.inplace) {
          verify_copy(out, c, rank, 0, 0, bad);
          if (bad.any()) return bad.str("non-root in-place buffer was modified");
        } else if (recv) {
          size_t k = recv_buf.first_non_sentinel(0, recv_buf.bytes());
          if (k != SIZE_MAX) return "non-root recv buffer was written (byte " + std::to_string(k) + ")";
        }
        break;
      case Collective::all_gather:
        for (int q = 0; q < n; ++q) verify_copy(out + q * c, c, q, 0, q * c, bad);
        break;
      case Collective::broadcast:
        verify_copy(out, c, k_.root, 0, 0, bad);
        break;
      case Collective::all_to_all:
        for (int q = 0; q < n; ++q) verify_copy(out + q * c, c, q, static_cast<size_t>(rank) * c, q * c, bad);
        break;
      default:
        return std::string("no reference for ") + strata::name(k_.coll);
    }
    if (bad.any()) return bad.str("wrong result");
    return {};
  }

 private:
  struct Ref {
    C val;
    long double sumabs;
  };

  bool reducing() const { return strata::info(k_.coll).has_op; }

  // The reduction over ranks of input index gi, and the sum of magnitudes (for the tolerance).
  Ref reference(size_t gi) const {
    C acc = T::dec(in(0, gi));
    long double sa = std::fabs(static_cast<long double>(acc));
    for (int r = 1; r < k_.n; ++r) {
      C v = T::dec(in(r, gi));
      acc = combine<C>(k_.op, acc, v);
      sa += std::fabs(static_cast<long double>(v));
    }
    if (k_.op == strata::ReduceOp::avg) acc = acc / static_cast<C>(k_.n);  // integers: truncates
    return {acc, sa};
  }
  bool reduce_ok(S got, const Ref& ref) const {
    if constexpr (!T::flt) {
      return got == static_cast<S>(ref.val);
    } else {
      long double tol = tolerance<D>(k_.op, k_.n, ref.val, ref.sumabs);
      return std::fabs(T::dec(got) - ref.val) <= tol;  // false for NaN
    }
  }
  std::string show_ref(const Ref& ref) const {
    if constexpr (!T::flt) {
      return T::show(static_cast<S>(ref.val));
    } else {
      char b[96];
      snprintf(b, sizeof b, "%.10Lg (tolerance %.3Lg)", ref.val, tolerance<D>(k_.op, k_.n, ref.val, ref.sumabs));
      return b;
    }
  }
  static bool same_bits(S a, S b) { return std::memcmp(&a, &b, sizeof(S)) == 0; }

  // out[i] must equal the reduction over ranks of input index (off + i).
  void verify_reduction(const S* out, size_t cnt, size_t off, Bad& bad) const {
    for (size_t i = 0; i < cnt; ++i) {
      Ref ref = reference(off + i);
      if (!reduce_ok(out[i], ref)) bad.note(i, [&] { return T::show(out[i]); }, [&] { return show_ref(ref); });
    }
  }
  // out[i] must equal in(src_rank, src_off + i), bit for bit.
  void verify_copy(const S* out, size_t cnt, int src_rank, size_t src_off, size_t out_off, Bad& bad) const {
    for (size_t i = 0; i < cnt; ++i) {
      S e = in(src_rank, src_off + i);
      if (!same_bits(out[i], e))
        bad.note(out_off + i, [&] { return T::show(out[i]); },
                 [&] { return T::show(e) + " (from rank " + std::to_string(src_rank) + ")"; });
    }
  }

  CollCall k_;
  std::vector<uint64_t> bases_;
};

}  // namespace strata_test
