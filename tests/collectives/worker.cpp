// strata-test-worker: run under strata-run; checks every collective against a serial
// reference computed locally from deterministic inputs (seed, rank, index).
//
//   strata-run -n 4 -- strata-test-worker [--quick] [--medium] [--big] [--misc|--no-misc]
//       [--colls=all_reduce,...] [--types=float,int8,...] [--ops=sum,...] [--sizes=0,7,...]
//       [--inplace=both|in|out] [--roots=all|one] [--seed=N] [--max-print=N] [--verbose]
//
// With no preset, --quick is assumed. --quick: every collective x type x op at sizes
// 0, 1, 7, 1001 and 4096/size_of(type) +-1, in and out of place, every root at small
// sizes, plus point-to-point, groups, async, barrier and split tests (--misc).
// --medium: 65536 +-1 elements. --big: 64 MiB float32 sum for each collective.
// Exit status: 0 all passed, 1 a result was wrong, 2 the library threw, 3 other error.
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

using namespace strata;
using namespace strata_test;

namespace {

int g_max_print = 10;
bool g_verbose = false;

double mono_s() {
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
Reporter g_rep;

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

// ---------------------------------------------------------------- collective cases
enum class Coll { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all };
constexpr Coll kAllColls[] = {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather,
                              Coll::broadcast,  Coll::reduce,         Coll::all_to_all};
const char* coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::all_gather: return "all_gather";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
    case Coll::all_to_all: return "all_to_all";
  }
  return "?";
}
bool is_reducing(Coll c) {
  return c == Coll::all_reduce || c == Coll::reduce_scatter || c == Coll::reduce;
}
bool is_rooted(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }

struct CaseBase {
  std::string desc;
  virtual ~CaseBase() = default;
  virtual void prepare() = 0;
  virtual void run_blocking(Comm& c) = 0;
  virtual Request launch(Comm& c) = 0;
  virtual std::string check() = 0;  // empty when correct
};

template <DataType D>
class CollCase : public CaseBase {
  using T = TT<D>;
  using S = typename T::S;
  using C = typename T::C;

 public:
  CollCase(Comm& comm, Coll coll, ReduceOp op, size_t count, bool inplace, int root,
           uint64_t seed)
      : coll_(coll), op_(op), count_(count), inplace_(inplace), root_(root), seed_(seed) {
    rank_ = comm.rank();
    n_ = comm.size();
    std::ostringstream o;
    o << coll_name(coll) << " type=" << name(D);
    if (is_reducing(coll)) o << " op=" << name(op);
    o << " count=" << count << (inplace ? " in-place" : " out-of-place");
    if (is_rooted(coll)) o << " root=" << root;
    o << " nranks=" << n_;
    desc = o.str();
  }

  S in(int r, size_t i) const {
    uint64_t h = mix64(bases_[r] + i);
    if (is_reducing(coll_)) return gen_reduce_input<D>(op_, h, r, n_);
    return gen_raw<S>(h);
  }

  void prepare() override {
    bases_.resize(n_);
    for (int r = 0; r < n_; ++r) bases_[r] = rank_base(seed_, r);
    const size_t sz = sizeof(S), c = count_, nc = static_cast<size_t>(n_) * count_;
    auto fill_in = [&](Buf& b, size_t elems, size_t dst_off, size_t src_off) {
      S* p = b.as<S>();
      for (size_t i = 0; i < elems; ++i) p[dst_off + i] = in(rank_, src_off + i);
    };
    // A separate output, filled with sentinels so that untouched elements show.
    auto fresh_output = [&](size_t bytes) {
      b_.alloc(bytes);
      b_.fill_sentinel();
      return b_.data();
    };
    switch (coll_) {
      case Coll::all_reduce:
        a_.alloc(c * sz);
        fill_in(a_, c, 0, 0);
        if (inplace_) {
          send_ = recv_ = a_.data();
        } else {
          send_ = a_.data();
          recv_ = fresh_output(c * sz);
        }
        break;
      case Coll::reduce_scatter:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        send_ = a_.data();
        if (inplace_) {
          recv_ = a_.data() + rank_ * c * sz;
        } else {
          recv_ = fresh_output(c * sz);
        }
        break;
      case Coll::all_gather:
        if (inplace_) {
          a_.alloc(nc * sz);
          a_.fill_sentinel();
          fill_in(a_, c, rank_ * c, 0);
          recv_ = a_.data();
          send_ = a_.data() + rank_ * c * sz;
        } else {
          a_.alloc(c * sz);
          fill_in(a_, c, 0, 0);
          send_ = a_.data();
          recv_ = fresh_output(nc * sz);
        }
        break;
      case Coll::broadcast:
        // Non-roots hold their own data in `send`, which must be ignored.
        a_.alloc(c * sz);
        if (inplace_ && rank_ != root_)
          a_.fill_sentinel();
        else
          fill_in(a_, c, 0, 0);
        if (inplace_) {
          send_ = recv_ = a_.data();
        } else {
          send_ = a_.data();
          recv_ = fresh_output(c * sz);
        }
        break;
      case Coll::reduce:
        a_.alloc(c * sz);
        fill_in(a_, c, 0, 0);
        send_ = a_.data();
        if (inplace_) {
          recv_ = a_.data();
        } else if (rank_ != root_ && ((seed_ >> 7) & 1)) {
          recv_ = nullptr;  // allowed on non-roots
        } else {
          recv_ = fresh_output(c * sz);
        }
        break;
      case Coll::all_to_all:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        send_ = a_.data();
        if (inplace_) {
          recv_ = a_.data();
        } else {
          recv_ = fresh_output(nc * sz);
        }
        break;
    }
  }

  void run_blocking(Comm& c) override {
    switch (coll_) {
      case Coll::all_reduce: c.all_reduce(send_, recv_, count_, D, op_); break;
      case Coll::reduce_scatter: c.reduce_scatter(send_, recv_, count_, D, op_); break;
      case Coll::all_gather: c.all_gather(send_, recv_, count_, D); break;
      case Coll::broadcast: c.broadcast(send_, recv_, count_, D, root_); break;
      case Coll::reduce: c.reduce(send_, recv_, count_, D, op_, root_); break;
      case Coll::all_to_all: c.all_to_all(send_, recv_, count_, D); break;
    }
  }
  Request launch(Comm& c) override {
    switch (coll_) {
      case Coll::all_reduce: return c.all_reduce_async(send_, recv_, count_, D, op_);
      case Coll::reduce_scatter: return c.reduce_scatter_async(send_, recv_, count_, D, op_);
      case Coll::all_gather: return c.all_gather_async(send_, recv_, count_, D);
      case Coll::broadcast: return c.broadcast_async(send_, recv_, count_, D, root_);
      case Coll::reduce: return c.reduce_async(send_, recv_, count_, D, op_, root_);
      case Coll::all_to_all: return c.all_to_all_async(send_, recv_, count_, D);
    }
    return {};
  }

  struct Ref {
    C val;
    long double sumabs;
  };
  Ref reference(size_t gi) const {
    C acc = T::dec(in(0, gi));
    long double sa = std::fabs(static_cast<long double>(acc));
    for (int r = 1; r < n_; ++r) {
      C v = T::dec(in(r, gi));
      acc = combine<C>(op_, acc, v);
      sa += std::fabs(static_cast<long double>(v));
    }
    if (op_ == ReduceOp::avg) acc = acc / static_cast<C>(n_);  // integers: truncates
    return {acc, sa};
  }
  bool reduce_ok(S got, const Ref& ref) const {
    if constexpr (!T::flt) {
      return got == static_cast<S>(ref.val);
    } else {
      long double tol = tolerance<D>(op_, n_, ref.val, ref.sumabs);
      return std::fabs(T::dec(got) - ref.val) <= tol;  // false for NaN
    }
  }
  std::string show_ref(const Ref& ref) const {
    if constexpr (!T::flt) {
      return T::show(static_cast<S>(ref.val));
    } else {
      char b[96];
      snprintf(b, sizeof b, "%.10Lg (tolerance %.3Lg)", ref.val,
               tolerance<D>(op_, n_, ref.val, ref.sumabs));
      return b;
    }
  }
  static bool same_bits(S a, S b) { return std::memcmp(&a, &b, sizeof(S)) == 0; }

  // recv[i] must equal the reduction over ranks of input index (off + i).
  void verify_reduction(const S* out, size_t cnt, size_t off, Bad& bad) const {
    for (size_t i = 0; i < cnt; ++i) {
      Ref ref = reference(off + i);
      if (!reduce_ok(out[i], ref))
        bad.note(i, [&] { return T::show(out[i]); }, [&] { return show_ref(ref); });
    }
  }
  // out[i] must equal in(src_rank, src_off + i), bit for bit.
  void verify_copy(const S* out, size_t cnt, int src_rank, size_t src_off, size_t out_off,
                   Bad& bad) const {
    for (size_t i = 0; i < cnt; ++i) {
      S e = in(src_rank, src_off + i);
      if (!same_bits(out[i], e))
        bad.note(out_off + i, [&] { return T::show(out[i]); },
                 [&] { return T::show(e) + " (from rank " + std::to_string(src_rank) + ")"; });
    }
  }

  std::string check() override {
    if (!a_.guards_ok()) return "guard bytes around the send/in-place buffer were overwritten";
    if (!b_.guards_ok()) return "guard bytes around the recv buffer were overwritten";
    const size_t c = count_, nc = static_cast<size_t>(n_) * count_;
    Bad bad;
    // An out-of-place send buffer must be left as it was.
    if (!inplace_) {
      size_t elems = (coll_ == Coll::reduce_scatter || coll_ == Coll::all_to_all) ? nc : c;
      verify_copy(a_.as<S>(), elems, rank_, 0, 0, bad);
      if (bad.any()) return bad.str("send buffer was modified");
    }
    const S* out = static_cast<const S*>(recv_);
    switch (coll_) {
      case Coll::all_reduce:
        verify_reduction(out, c, 0, bad);
        break;
      case Coll::reduce_scatter:
        verify_reduction(out, c, static_cast<size_t>(rank_) * c, bad);
        break;
      case Coll::reduce:
        if (rank_ == root_) {
          verify_reduction(out, c, 0, bad);
        } else if (inplace_) {
          verify_copy(out, c, rank_, 0, 0, bad);
          if (bad.any()) return bad.str("non-root in-place buffer was modified");
        } else if (recv_) {
          size_t k = b_.first_non_sentinel(0, b_.bytes());
          if (k != SIZE_MAX)
            return "non-root recv buffer was written (byte " + std::to_string(k) + ")";
        }
        break;
      case Coll::all_gather:
        for (int q = 0; q < n_; ++q) verify_copy(out + q * c, c, q, 0, q * c, bad);
        break;
      case Coll::broadcast:
        verify_copy(out, c, root_, 0, 0, bad);
        break;
      case Coll::all_to_all:
        for (int q = 0; q < n_; ++q)
          verify_copy(out + q * c, c, q, static_cast<size_t>(rank_) * c, q * c, bad);
        break;
    }
    if (bad.any()) return bad.str("wrong result");
    return {};
  }

 private:
  Coll coll_;
  ReduceOp op_;
  size_t count_;
  bool inplace_;
  int root_;
  uint64_t seed_;
  int rank_ = 0, n_ = 1;
  std::vector<uint64_t> bases_;
  Buf a_, b_;
  const void* send_ = nullptr;
  void* recv_ = nullptr;
};

std::unique_ptr<CaseBase> make_case(Comm& comm, Coll coll, DataType t, ReduceOp op,
                                    size_t count, bool inplace, int root, uint64_t seed) {
#define STRATA_CASE(D) \
  case DataType::D:    \
    return std::make_unique<CollCase<DataType::D>>(comm, coll, op, count, inplace, root, seed);
  switch (t) {
    STRATA_CASE(int8)
    STRATA_CASE(uint8)
    STRATA_CASE(int32)
    STRATA_CASE(uint32)
    STRATA_CASE(int64)
    STRATA_CASE(uint64)
    STRATA_CASE(float16)
    STRATA_CASE(bfloat16)
    STRATA_CASE(float32)
    STRATA_CASE(float64)
  }
#undef STRATA_CASE
  return nullptr;
}

// ---------------------------------------------------------------- options
struct Options {
  bool quick = false, medium = false, big = false;
  int misc = -1;  // -1: on when --quick
  std::vector<Coll> colls{std::begin(kAllColls), std::end(kAllColls)};
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  std::optional<std::vector<size_t>> sizes;
  bool in = true, out = true;
  bool all_roots = true;
  uint64_t seed = 12345;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) v.push_back(x);
  return v;
}

[[noreturn]] void usage(const std::string& why) {
  fprintf(stderr, "strata-test-worker: %s\n", why.c_str());
  exit(3);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < kNumDataTypes; ++i) o.types.push_back(static_cast<DataType>(i));
  for (int i = 0; i < kNumReduceOps; ++i) o.ops.push_back(static_cast<ReduceOp>(i));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* key) -> std::optional<std::string> {
      std::string k = std::string(key) + "=";
      if (a.rfind(k, 0) == 0) return a.substr(k.size());
      return std::nullopt;
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--medium") o.medium = true;
    else if (a == "--big") o.big = true;
    else if (a == "--misc") o.misc = 1;
    else if (a == "--no-misc") o.misc = 0;
    else if (a == "--verbose") g_verbose = true;
    else if (auto v = val("--colls")) {
      o.colls.clear();
      for (auto& s : split_list(*v)) {
        bool found = false;
        for (Coll c : kAllColls)
          if (s == coll_name(c)) o.colls.push_back(c), found = true;
        if (!found) usage("unknown collective " + s);
      }
    } else if (auto v = val("--types")) {
      o.types.clear();
      for (auto& s : split_list(*v)) {
        auto t = parse_datatype(s);
        if (!t) usage("unknown type " + s);
        o.types.push_back(*t);
      }
    } else if (auto v = val("--ops")) {
      o.ops.clear();
      for (auto& s : split_list(*v)) {
        auto op = parse_reduce_op(s);
        if (!op) usage("unknown op " + s);
        o.ops.push_back(*op);
      }
    } else if (auto v = val("--sizes")) {
      std::vector<size_t> s;
      for (auto& x : split_list(*v)) s.push_back(std::stoull(x));
      o.sizes = s;
    } else if (auto v = val("--inplace")) {
      o.in = *v != "out";
      o.out = *v != "in";
    } else if (auto v = val("--roots")) {
      o.all_roots = *v == "all";
    } else if (auto v = val("--seed")) {
      o.seed = std::stoull(*v);
    } else if (auto v = val("--max-print")) {
      g_max_print = std::stoi(*v);
    } else {
      usage("unknown option " + a);
    }
  }
  if (!o.quick && !o.medium && !o.big && !o.sizes) o.quick = true;
  if (o.misc < 0) o.misc = o.quick ? 1 : 0;
  return o;
}

// ---------------------------------------------------------------- matrix of cases
struct CaseSpec {
  Coll coll;
  DataType type;
  ReduceOp op;
  size_t count;
  bool inplace;
  int root;
};

std::vector<CaseSpec> build_matrix(const Options& o, int n) {
  std::vector<CaseSpec> v;
  uint64_t pick = 0;  // deterministic rotation for choices that need not be exhaustive
  auto placements = [&](size_t count) {
    std::vector<bool> p;
    if (o.out) p.push_back(false);
    if (o.in) p.push_back(true);
    (void)count;
    return p;
  };
  auto add = [&](Coll c, DataType t, ReduceOp op, size_t count, bool exhaustive_roots,
                 const std::vector<bool>& places) {
    for (bool ip : places) {
      if (!is_rooted(c)) {
        v.push_back({c, t, op, count, ip, -1});
      } else if (exhaustive_roots && o.all_roots) {
        for (int r = 0; r < n; ++r) v.push_back({c, t, op, count, ip, r});
      } else {
        v.push_back({c, t, op, count, ip, static_cast<int>(mix64(++pick) % n)});
      }
    }
  };
  for (Coll c : o.colls) {
    for (DataType t : o.types) {
      const size_t sz = size_of(t);
      std::vector<ReduceOp> ops = is_reducing(c) ? o.ops : std::vector<ReduceOp>{ReduceOp::sum};
      if (o.sizes) {
        for (ReduceOp op : ops)
          for (size_t s : *o.sizes) add(c, t, op, s, s <= 7, placements(s));
      }
      if (o.quick) {
        const size_t cb = 4096 / sz;
        for (ReduceOp op : ops) {
          // every root at tiny sizes (for every op of reduce would be redundant: sum only)
          bool ex = !is_reducing(c) || op == ReduceOp::sum || ops.size() == 1;
          for (size_t s : {size_t(0), size_t(1), size_t(7)}) add(c, t, op, s, ex, placements(s));
          for (size_t s : {size_t(1001), cb - 1, cb, cb + 1}) add(c, t, op, s, false, placements(s));
        }
      }
      if (o.medium) {
        // sum plus one other op per type (rotating), one placement per size (rotating)
        std::vector<ReduceOp> mops;
        if (is_reducing(c)) {
          for (ReduceOp op : ops)
            if (op == ReduceOp::sum) mops.push_back(op);
          std::vector<ReduceOp> others;
          for (ReduceOp op : ops)
            if (op != ReduceOp::sum) others.push_back(op);
          if (!others.empty()) mops.push_back(others[static_cast<int>(t) % others.size()]);
        } else {
          mops.push_back(ReduceOp::sum);
        }
        auto pl = placements(0);
        int k = 0;
        for (ReduceOp op : mops)
          for (size_t s : {size_t(65535), size_t(65536), size_t(65537)}) {
            std::vector<bool> one{pl[(k++ + static_cast<int>(t)) % pl.size()]};
            add(c, t, op, s, false, one);
          }
      }
    }
  }
  if (o.big) {
    // 64 MiB float32 sum: the larger buffer of each collective is 64 MiB.
    const size_t full = (size_t(64) << 20) / 4;
    for (Coll c : o.colls) {
      bool per_rank = c == Coll::reduce_scatter || c == Coll::all_gather || c == Coll::all_to_all;
      size_t count = per_rank ? full / n : full;
      if (o.out) v.push_back({c, DataType::float32, ReduceOp::sum, count, false, n - 1});
      if (o.in && c == Coll::all_reduce)
        v.push_back({c, DataType::float32, ReduceOp::sum, count, true, n - 1});
    }
  }
  return v;
}

// Runs one case; a library exception ends the program (the ranks are out of step).
void run_case(Comm& comm, CaseBase& cs, bool use_async) {
  double t0 = mono_s();
  cs.prepare();
  double t1 = mono_s();
  try {
    if (use_async) {
      Request r = cs.launch(comm);
      r.wait();
    } else {
      cs.run_blocking(comm);
    }
  } catch (const Error& e) {
    fprintf(stderr, "FAIL rank %d/%d: %s%s: threw %s\n", g_rep.rank, g_rep.n, cs.desc.c_str(),
            use_async ? " (async)" : "", e.what());
    exit(2);
  }
  double t2 = mono_s();
  std::string err = cs.check();
  if (g_verbose)
    printf("timing %s: prepare %.3f s, run %.3f s, check %.3f s\n", cs.desc.c_str(), t1 - t0, t2 - t1,
           mono_s() - t2);
  g_rep.result(cs.desc, err);
}

// ---------------------------------------------------------------- misc tests
// Raw-byte message helpers for point-to-point tests.
void fill_raw(Buf& b, uint64_t base) {
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
std::string check_raw(const Buf& got, uint64_t base, size_t elem_size, const char* what) {
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
uint64_t msg_base(uint64_t seed, int src, int dst, int k) {
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

// Blocking send/recv around a ring; even ranks send first, odd ranks receive first.
void test_p2p_ring(Comm& comm, const std::vector<DataType>& types, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  int next = (r + 1) % n, prev = (r - 1 + n) % n;
  for (DataType t : types) {
    size_t sz = size_of(t);
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001), 4096 / sz + 1, size_t(65537)}) {
      uint64_t s = mix64(seed + count * 131 + static_cast<int>(t));
      std::string desc = std::string("send/recv ring type=") + name(t) + " count=" + std::to_string(count);
      Buf sb(count * sz), rb(count * sz);
      fill_raw(sb, msg_base(s, r, next, 0));
      rb.fill_sentinel();
      guarded(desc, [&] {
        if (r % 2 == 0) {
          comm.send(sb.data(), count, t, next);
          comm.recv(rb.data(), count, t, prev);
        } else {
          comm.recv(rb.data(), count, t, prev);
          comm.send(sb.data(), count, t, next);
        }
      });
      std::string err = check_raw(rb, msg_base(s, prev, r, 0), sz, "received data");
      if (err.empty()) err = check_raw(sb, msg_base(s, r, next, 0), sz, "send buffer (must not change)");
      g_rep.result(desc, err);
    }
  }
}

// Many async sends and receives outstanding at once, several messages per peer pair
// (matched in posting order), waited in reverse order. Operations on a communicator run
// one at a time in issue order, so a send larger than the transport can buffer completes
// only once the peer runs the matching recv: in round k (send to r+k, recv from r-k) one
// rank of each cycle of the shift (r < gcd(n, k)) receives first, the others send first.
void test_p2p_async(Comm& comm, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  const DataType kTypes[] = {DataType::float32, DataType::int8, DataType::float64, DataType::bfloat16};
  const size_t kCounts[] = {1001, 0, 65537, 3};
  struct Msg {
    Buf buf;
    uint64_t base;
    size_t elem;
    std::string what;
  };
  std::vector<Msg> sends, recvs;
  std::vector<Request> reqs;
  std::string desc = "send_async/recv_async to every peer, 4 messages each, nranks=" + std::to_string(n);
  guarded(desc, [&] {
    for (int k = 1; k < n; ++k) {
      int dst = (r + k) % n, src = (r - k + n) % n;
      const bool recv_first = r < std::gcd(n, k);
      for (int m = 0; m < 4; ++m) {
        DataType t = kTypes[(m + k) % 4];
        size_t count = kCounts[m], sz = size_of(t);
        Msg s{Buf(count * sz), msg_base(seed, r, dst, m), sz, ""};
        fill_raw(s.buf, s.base);
        Msg rv{Buf(count * sz), msg_base(seed, src, r, m), sz,
               "message " + std::to_string(m) + " from rank " + std::to_string(src)};
        rv.buf.fill_sentinel();
        if (recv_first) reqs.push_back(comm.recv_async(rv.buf.data(), count, t, src));
        reqs.push_back(comm.send_async(s.buf.data(), count, t, dst));
        if (!recv_first) reqs.push_back(comm.recv_async(rv.buf.data(), count, t, src));
        sends.push_back(std::move(s));
        recvs.push_back(std::move(rv));
      }
    }
    // (an empty Request means "already complete"; the library returns one for count 0)
    for (size_t i = 0; i < reqs.size(); ++i)
      if (!reqs[i].valid() && kCounts[(i / 2) % 4] != 0)
        throw InternalError("an _async call with count > 0 outside a group returned an empty Request");
    for (size_t i = reqs.size(); i-- > 0;) reqs[i].wait();
  });
  std::string err;
  for (auto& m : recvs)
    if (err.empty()) err = check_raw(m.buf, m.base, m.elem, m.what.c_str());
  for (auto& m : sends)
    if (err.empty()) err = check_raw(m.buf, m.base, m.elem, "send buffer (must not change)");
  g_rep.result(desc, err);
}

// All-to-all exchange through grouped send/recv, including to and from self.
void test_group_p2p(Comm& comm, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  const DataType kTypes[] = {DataType::float32, DataType::int8, DataType::float64, DataType::uint64};
  int variant = 0;
  for (DataType t : kTypes) {
    for (size_t count : {size_t(0), size_t(1), size_t(1001), size_t(65537)}) {
      ++variant;
      int v = variant % 4;
      size_t sz = size_of(t);
      std::vector<Buf> sb, rb;
      for (int q = 0; q < n; ++q) {
        sb.emplace_back(count * sz);
        fill_raw(sb.back(), msg_base(seed + variant, r, q, 0));
        rb.emplace_back(count * sz);
        rb.back().fill_sentinel();
      }
      static const char* kv[] = {"plain", "nested groups + _async forms", "group_end_async",
                                 "recvs first, reverse order"};
      std::string desc = std::string("grouped send/recv all-to-all incl. self (") + kv[v] +
                         ") type=" + name(t) + " count=" + std::to_string(count) +
                         " nranks=" + std::to_string(n);
      std::string err;
      guarded(desc, [&] {
        if (v == 0) {
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            comm.send(sb[q].data(), count, t, q);
            comm.recv(rb[q].data(), count, t, q);
          }
          comm.group_end();
        } else if (v == 1) {
          comm.group_start();
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            Request x = comm.send_async(sb[q].data(), count, t, q);
            if (x.valid()) err = "send_async inside a group returned a non-empty Request";
          }
          comm.group_end();
          for (int q = 0; q < n; ++q) {
            Request x = comm.recv_async(rb[q].data(), count, t, q);
            if (x.valid()) err = "recv_async inside a group returned a non-empty Request";
          }
          comm.group_end();
        } else if (v == 2) {
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            comm.recv(rb[q].data(), count, t, q);
            comm.send(sb[q].data(), count, t, q);
          }
          Request x = comm.group_end_async();
          x.wait();
        } else {
          comm.group_start();
          for (int q = n - 1; q >= 0; --q) comm.recv(rb[q].data(), count, t, q);
          for (int q = n - 1; q >= 0; --q) comm.send(sb[q].data(), count, t, q);
          comm.group_end();
        }
      });
      for (int q = 0; q < n && err.empty(); ++q)
        err = check_raw(rb[q], msg_base(seed + variant, q, r, 0), sz,
                        ("data received from rank " + std::to_string(q)).c_str());
      g_rep.result(desc, err);
    }
  }
}

// Several different async collectives outstanding at once, waited in reverse order.
void test_async_mix(Comm& comm, uint64_t seed) {
  int n = comm.size();
  std::vector<std::unique_ptr<CaseBase>> cs;
  cs.push_back(make_case(comm, Coll::all_reduce, DataType::float32, ReduceOp::sum, 1001, false, -1, seed + 1));
  cs.push_back(make_case(comm, Coll::all_gather, DataType::int32, ReduceOp::sum, 65537, false, -1, seed + 2));
  cs.push_back(make_case(comm, Coll::broadcast, DataType::float64, ReduceOp::sum, 4097, false, n - 1, seed + 3));
  cs.push_back(make_case(comm, Coll::reduce_scatter, DataType::bfloat16, ReduceOp::sum, 1001, true, -1, seed + 4));
  cs.push_back(make_case(comm, Coll::all_to_all, DataType::uint8, ReduceOp::sum, 1001, false, -1, seed + 5));
  cs.push_back(make_case(comm, Coll::reduce, DataType::int64, ReduceOp::max, 333, false, 0, seed + 6));
  cs.push_back(make_case(comm, Coll::all_reduce, DataType::float16, ReduceOp::avg, 7, true, -1, seed + 7));
  cs.push_back(make_case(comm, Coll::all_reduce, DataType::int32, ReduceOp::prod, 65537, false, -1, seed + 8));
  std::string desc = "8 async collectives + barrier_async outstanding at once, nranks=" + std::to_string(n);
  for (auto& c : cs) c->prepare();
  guarded(desc, [&] {
    std::vector<Request> reqs;
    for (size_t i = 0; i < cs.size(); ++i) {
      reqs.push_back(cs[i]->launch(comm));
      if (i == 3) reqs.push_back(comm.barrier_async());
    }
    for (size_t i = reqs.size(); i-- > 0;) reqs[i].wait();
  });
  std::string err;
  for (auto& c : cs) {
    std::string e = c->check();
    if (!e.empty() && err.empty()) err = c->desc + ": " + e;
  }
  g_rep.result(desc, err);

  // test() polling until done
  auto c = make_case(comm, Coll::all_reduce, DataType::float32, ReduceOp::sum, 65537, false, -1, seed + 9);
  c->prepare();
  std::string d2 = "Request::test() polling on all_reduce_async, nranks=" + std::to_string(n);
  guarded(d2, [&] {
    Request q = c->launch(comm);
    double t0 = mono_s();
    while (!q.test()) {
      if (mono_s() - t0 > 120) throw InternalError("test() never returned true");
      std::this_thread::yield();
    }
  });
  g_rep.result(d2, c->check());
}

// An _async call must return before the operation can complete: the last rank joins late.
void test_async_returns_at_once(Comm& comm, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  auto c = make_case(comm, Coll::all_reduce, DataType::int32, ReduceOp::sum, 1001, false, -1, seed);
  c->prepare();
  std::string desc = "all_reduce_async returns before a late rank joins, nranks=" + std::to_string(n);
  std::string err;
  guarded(desc, [&] {
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    double t0 = mono_s();
    Request q = c->launch(comm);
    double dt = mono_s() - t0;
    if (r != n - 1) {
      if (dt > 0.5) err = "all_reduce_async took " + std::to_string(dt) + " s to return";
      else if (q.test()) err = "test() reported completion although the last rank had not joined";
    }
    q.wait();
  });
  std::string e = c->check();
  g_rep.result(desc, err.empty() ? e : err);
}

// After a barrier no rank may leave before the last one entered (CLOCK_MONOTONIC is
// shared by all processes on the host).
void test_barrier(Comm& comm) {
  int r = comm.rank(), n = comm.size();
  for (int it = 0; it < 4; ++it) {
    std::string desc = std::string("barrier") + (it % 2 ? "_async" : "") +
                       " (rank " + std::to_string(it % n) + " late) nranks=" + std::to_string(n);
    int64_t times[2];
    std::vector<int64_t> all(2 * n, -1);
    guarded(desc, [&] {
      if (r == it % n) std::this_thread::sleep_for(std::chrono::milliseconds(150));
      times[0] = static_cast<int64_t>(mono_s() * 1e9);
      if (it % 2) comm.barrier_async().wait();
      else comm.barrier();
      times[1] = static_cast<int64_t>(mono_s() * 1e9);
      comm.all_gather(times, all.data(), 2, DataType::int64);
    });
    int64_t max_enter = 0, min_exit = INT64_MAX;
    for (int q = 0; q < n; ++q) {
      max_enter = std::max(max_enter, all[2 * q]);
      min_exit = std::min(min_exit, all[2 * q + 1]);
    }
    std::string err;
    if (all[2 * r] != times[0] || all[2 * r + 1] != times[1]) err = "all_gather of timestamps is wrong";
    else if (min_exit < max_enter)
      err = "a rank left the barrier " + std::to_string((max_enter - min_exit) / 1e6) +
            " ms before the last rank entered";
    g_rep.result(desc, err);
  }
}

// split(): even/odd colors with reversed keys, a color -1 rank, nested split.
void test_split(Comm& comm, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  {
    std::string desc = "split(color=rank%2, key=-rank) then all_gather/all_reduce/broadcast on it, nranks=" + std::to_string(n);
    std::vector<int> members;  // old ranks, in new-rank order: key -old ascending
    for (int q = n - 1; q >= 0; --q)
      if (q % 2 == r % 2) members.push_back(q);
    int expect_rank = static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    int m = static_cast<int>(members.size());
    std::string err;
    Comm sub;
    guarded(desc, [&] { sub = comm.split(r % 2, -r); });
    if (!sub.valid()) {
      err = "split returned a null Comm for color " + std::to_string(r % 2);
    } else if (sub.size() != m || sub.rank() != expect_rank) {
      err = "sub-communicator rank/size " + std::to_string(sub.rank()) + "/" + std::to_string(sub.size()) +
            ", expected " + std::to_string(expect_rank) + "/" + std::to_string(m);
    } else {
      std::vector<int32_t> gathered(m, -1);
      int32_t mine = r;
      const size_t cnt = 1001;
      std::vector<float> x(cnt), y(cnt, -1.f);
      auto val = [&](int old, size_t i) {  // small integers: exact float sums
        return static_cast<float>(static_cast<int>(mix64(seed + old * 7919 + i) % 201) - 100);
      };
      for (size_t i = 0; i < cnt; ++i) x[i] = val(r, i);
      std::vector<double> z(cnt);
      guarded(desc, [&] {
        sub.all_gather(&mine, gathered.data(), 1, DataType::int32);
        sub.all_reduce(x.data(), y.data(), cnt, DataType::float32, ReduceOp::sum);
        // broadcast from new rank 0 (the highest old rank of this color)
        for (size_t i = 0; i < cnt; ++i) z[i] = sub.rank() == 0 ? val(r, i) * 0.5 : -7;
        sub.broadcast(z.data(), z.data(), cnt, DataType::float64, 0);
      });
      for (int k = 0; k < m && err.empty(); ++k)
        if (gathered[k] != members[k])
          err = "all_gather on sub-communicator: position " + std::to_string(k) + " holds old rank " +
                std::to_string(gathered[k]) + ", expected " + std::to_string(members[k]);
      for (size_t i = 0; i < cnt && err.empty(); ++i) {
        float e = 0;
        for (int q : members) e += val(q, i);
        if (y[i] != e)
          err = "all_reduce on sub-communicator: index " + std::to_string(i) + " got " +
                std::to_string(y[i]) + " expected " + std::to_string(e);
        if (err.empty() && z[i] != val(members[0], i) * 0.5)
          err = "broadcast on sub-communicator: index " + std::to_string(i) + " got " + std::to_string(z[i]);
      }
      // nested split of the sub-communicator, same order (key = rank)
      if (err.empty()) {
        Comm sub2;
        int64_t one = r, tot = -1;
        guarded(desc + " [nested split]", [&] {
          sub2 = sub.split(5, sub.rank());
          if (sub2.valid()) sub2.reduce(&one, &tot, 1, DataType::int64, ReduceOp::sum, sub2.size() - 1);
        });
        int64_t e = 0;
        for (int q : members) e += q;
        if (!sub2.valid() || sub2.size() != m || sub2.rank() != expect_rank)
          err = "nested split gave a wrong communicator";
        else if (sub2.rank() == m - 1 && tot != e)
          err = "reduce on nested split: got " + std::to_string(tot) + " expected " + std::to_string(e);
        if (sub2.valid()) guarded(desc + " [destroy nested]", [&] { sub2.destroy(); });
      }
    }
    if (sub.valid()) guarded(desc + " [destroy]", [&] { sub.destroy(); });
    g_rep.result(desc, err);
  }
  {
    std::string desc = "split(color = rank==0 ? -1 : 7, key=0): null Comm on rank 0, all_reduce on the rest, nranks=" + std::to_string(n);
    std::string err;
    Comm sub;
    guarded(desc, [&] { sub = comm.split(r == 0 ? -1 : 7, 0); });
    if (r == 0) {
      if (sub.valid()) err = "color -1 returned a valid Comm";
      else {
        try {
          sub.barrier();
          err = "barrier on a null Comm did not throw";
        } catch (const InvalidUsage&) {
        } catch (const std::exception& e) {
          err = std::string("barrier on a null Comm threw the wrong type: ") + e.what();
        }
      }
    } else if (!sub.valid() || sub.size() != n - 1 || sub.rank() != r - 1) {
      err = "wrong communicator for color 7 (ties ordered by old rank)";
    } else {
      std::vector<int64_t> x(65537), y(65537, -1);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(mix64(seed + r * 100003 + i) >> 24);
      guarded(desc, [&] { sub.all_reduce(x.data(), y.data(), x.size(), DataType::int64, ReduceOp::sum); });
      for (size_t i = 0; i < x.size() && err.empty(); ++i) {
        int64_t e = 0;
        for (int q = 1; q < n; ++q) e += static_cast<int64_t>(mix64(seed + q * 100003 + i) >> 24);
        if (y[i] != e) err = "all_reduce on sub-communicator wrong at index " + std::to_string(i);
      }
      guarded(desc + " [destroy]", [&] { sub.destroy(); });
    }
    g_rep.result(desc, err);
  }
  // the parent still works after its children are gone
  auto c = make_case(comm, Coll::all_reduce, DataType::float32, ReduceOp::sum, 4097, false, -1, seed + 99);
  c->prepare();
  guarded("all_reduce on parent after split", [&] { c->run_blocking(comm); });
  g_rep.result("all_reduce on parent after split/destroy of children, nranks=" + std::to_string(n), c->check());
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  double t0 = mono_s();
  Comm comm;
  try {
    comm = Comm::init_from_env();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL: Comm::init_from_env threw: %s\n", e.what());
    return 2;
  }
  g_rep.rank = comm.rank();
  g_rep.n = comm.size();
  try {
    std::vector<CaseSpec> matrix = build_matrix(o, comm.size());
    uint64_t case_seed = o.seed;
    size_t idx = 0;
    for (const CaseSpec& s : matrix) {
      auto cs = make_case(comm, s.coll, s.type, s.op, s.count, s.inplace, s.root, mix64(++case_seed));
      // every third case through the _async form + wait()
      run_case(comm, *cs, (idx++ % 3) == 2);
    }
    if (o.misc) {
      uint64_t s = mix64(o.seed ^ 0xabcdef);
      test_p2p_ring(comm, o.types, s + 1);
      test_p2p_async(comm, s + 2);
      test_group_p2p(comm, s + 3);
      test_async_mix(comm, s + 4);
      test_async_returns_at_once(comm, s + 5);
      test_barrier(comm);
      test_split(comm, s + 6);
    }
    comm.destroy();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL rank %d: library threw: %s\n", g_rep.rank, e.what());
    return 2;
  } catch (const std::exception& e) {
    fprintf(stderr, "FAIL rank %d: exception: %s\n", g_rep.rank, e.what());
    return 3;
  }
  printf("strata-test-worker rank %d/%d: %ld cases passed, %ld failed (%.2f s)\n", g_rep.rank,
         g_rep.n, g_rep.passed, g_rep.failed, mono_s() - t0);
  fflush(stdout);
  return g_rep.failed ? 1 : 0;
}
