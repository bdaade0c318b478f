// The collective cases: each runs one call and checks it against a serial reference.
#include "worker_cases.hpp"

namespace strata_test {

namespace {

// ---------------------------------------------------------------- collective cases
bool is_reducing(Collective c) { return info(c).has_op; }
bool is_rooted(Collective c) { return info(c).has_root; }


template <DataType D>
class CollCase : public CaseBase {
  using T = TT<D>;
  using S = typename T::S;
  using C = typename T::C;

 public:
  CollCase(Comm& comm, Collective coll, ReduceOp op, size_t count, bool inplace, int root,
           uint64_t seed)
      : coll_(coll), op_(op), count_(count), inplace_(inplace), root_(root), seed_(seed) {
    rank_ = comm.rank();
    n_ = comm.size();
    std::ostringstream o;
    o << name(coll) << " type=" << name(D);
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
      case Collective::all_reduce:
        a_.alloc(c * sz);
        fill_in(a_, c, 0, 0);
        if (inplace_) {
          send_ = recv_ = a_.data();
        } else {
          send_ = a_.data();
          recv_ = fresh_output(c * sz);
        }
        break;
      case Collective::reduce_scatter:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        send_ = a_.data();
        if (inplace_) {
          recv_ = a_.data() + rank_ * c * sz;
        } else {
          recv_ = fresh_output(c * sz);
        }
        break;
      case Collective::all_gather:
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
      case Collective::broadcast:
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
      case Collective::reduce:
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
      case Collective::all_to_all:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        send_ = a_.data();
        if (inplace_) {
          recv_ = a_.data();
        } else {
          recv_ = fresh_output(nc * sz);
        }
        break;
      default: break;  // barrier, send, recv: not cases of the matrix
    }
  }

  void run_blocking(Comm& c) override {
    switch (coll_) {
      case Collective::all_reduce: c.all_reduce(send_, recv_, count_, D, op_); break;
      case Collective::reduce_scatter: c.reduce_scatter(send_, recv_, count_, D, op_); break;
      case Collective::all_gather: c.all_gather(send_, recv_, count_, D); break;
      case Collective::broadcast: c.broadcast(send_, recv_, count_, D, root_); break;
      case Collective::reduce: c.reduce(send_, recv_, count_, D, op_, root_); break;
      case Collective::all_to_all: c.all_to_all(send_, recv_, count_, D); break;
      default: break;  // barrier, send, recv: not cases of the matrix
    }
  }
  Request launch(Comm& c) override {
    switch (coll_) {
      case Collective::all_reduce: return c.all_reduce_async(send_, recv_, count_, D, op_);
      case Collective::reduce_scatter: return c.reduce_scatter_async(send_, recv_, count_, D, op_);
      case Collective::all_gather: return c.all_gather_async(send_, recv_, count_, D);
      case Collective::broadcast: return c.broadcast_async(send_, recv_, count_, D, root_);
      case Collective::reduce: return c.reduce_async(send_, recv_, count_, D, op_, root_);
      case Collective::all_to_all: return c.all_to_all_async(send_, recv_, count_, D);
      default: break;  // barrier, send, recv: not cases of the matrix
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
      size_t elems = (coll_ == Collective::reduce_scatter || coll_ == Collective::all_to_all) ? nc : c;
      verify_copy(a_.as<S>(), elems, rank_, 0, 0, bad);
      if (bad.any()) return bad.str("send buffer was modified");
    }
    const S* out = static_cast<const S*>(recv_);
    switch (coll_) {
      case Collective::all_reduce:
        verify_reduction(out, c, 0, bad);
        break;
      case Collective::reduce_scatter:
        verify_reduction(out, c, static_cast<size_t>(rank_) * c, bad);
        break;
      case Collective::reduce:
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
      case Collective::all_gather:
        for (int q = 0; q < n_; ++q) verify_copy(out + q * c, c, q, 0, q * c, bad);
        break;
      case Collective::broadcast:
        verify_copy(out, c, root_, 0, 0, bad);
        break;
      case Collective::all_to_all:
        for (int q = 0; q < n_; ++q)
          verify_copy(out + q * c, c, q, static_cast<size_t>(rank_) * c, q * c, bad);
        break;
      default: break;  // barrier, send, recv: not cases of the matrix
    }
    if (bad.any()) return bad.str("wrong result");
    return {};
  }

 private:
  Collective coll_;
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

}  // namespace

std::unique_ptr<CaseBase> make_case(Comm& comm, Collective coll, DataType t, ReduceOp op,
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
  auto add = [&](Collective c, DataType t, ReduceOp op, size_t count, bool exhaustive_roots,
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
  for (Collective c : o.colls) {
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
    for (Collective c : o.colls) {
      bool per_rank = c == Collective::reduce_scatter || c == Collective::all_gather || c == Collective::all_to_all;
      size_t count = per_rank ? full / n : full;
      if (o.out) v.push_back({c, DataType::float32, ReduceOp::sum, count, false, n - 1});
      if (o.in && c == Collective::all_reduce)
        v.push_back({c, DataType::float32, ReduceOp::sum, count, true, n - 1});
    }
  }
  return v;
}


void run_matrix(Comm& comm, const Options& o) {
  std::vector<CaseSpec> matrix = build_matrix(o, comm.size());
  uint64_t case_seed = o.seed;
  size_t idx = 0;
  for (const CaseSpec& s : matrix) {
    auto cs = make_case(comm, s.coll, s.type, s.op, s.count, s.inplace, s.root, mix64(++case_seed));
    run_case(comm, *cs, (idx++ % 3) == 2);
  }
}

}  // namespace strata_test
