// strata-test-worker's collective cases: the matrix of calls (collective x type x op x
// size x placement x root) and, for each call, its buffers and how it is issued. Their
// inputs and the reference they are checked against are in worker_checks.hpp.
#include <sstream>

#include "worker_cases.hpp"

namespace strata_test {

using namespace strata;

bool in_matrix(Collective c) { return info(c).send != Use::none && info(c).recv != Use::none; }

namespace {

template <DataType D>
class CollCase : public CaseBase {
  using S = typename TT<D>::S;

 public:
  explicit CollCase(const CollCall& k) : k_(k), expected_(k) {
    std::ostringstream o;
    o << name(k.coll) << " type=" << name(D);
    if (info(k.coll).has_op) o << " op=" << name(k.op);
    o << " count=" << k.count << (k.inplace ? " in-place" : " out-of-place");
    if (info(k.coll).has_root) o << " root=" << k.root;
    o << " nranks=" << k.n;
    desc = o.str();
  }

  void prepare() override {
    const int rank = k_.rank, root = k_.root;
    const bool inplace = k_.inplace;
    const size_t sz = sizeof(S), c = k_.count, nc = static_cast<size_t>(k_.n) * k_.count;
    auto fill_in = [&](Buf& b, size_t elems, size_t dst_off, size_t src_off) {
      S* p = b.as<S>();
      for (size_t i = 0; i < elems; ++i) p[dst_off + i] = expected_.in(rank, src_off + i);
    };
    // A separate output, filled with sentinels so that untouched elements show.
    auto fresh_output = [&](size_t bytes) {
      b_.alloc(bytes);
      b_.fill_sentinel();
      return b_.data();
    };
    // send is `a`; recv is `a` too in place, else a fresh output of `out_elems`.
    auto same_or_fresh = [&](size_t out_elems) {
      send_ = a_.data();
      recv_ = inplace ? a_.data() : fresh_output(out_elems * sz);
    };
    switch (k_.coll) {
      case Collective::all_reduce:
        a_.alloc(c * sz);
        fill_in(a_, c, 0, 0);
        same_or_fresh(c);
        break;
      case Collective::reduce_scatter:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        send_ = a_.data();
        if (inplace) {
          recv_ = a_.data() + rank * c * sz;
        } else {
          recv_ = fresh_output(c * sz);
        }
        break;
      case Collective::all_gather:
        if (inplace) {
          a_.alloc(nc * sz);
          a_.fill_sentinel();
          fill_in(a_, c, rank * c, 0);
          recv_ = a_.data();
          send_ = a_.data() + rank * c * sz;
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
        if (inplace && rank != root)
          a_.fill_sentinel();
        else
          fill_in(a_, c, 0, 0);
        same_or_fresh(c);
        break;
      case Collective::reduce:
        a_.alloc(c * sz);
        fill_in(a_, c, 0, 0);
        send_ = a_.data();
        if (inplace) {
          recv_ = a_.data();
        } else if (rank != root && ((k_.seed >> 7) & 1)) {
          recv_ = nullptr;  // allowed on non-roots
        } else {
          recv_ = fresh_output(c * sz);
        }
        break;
      case Collective::all_to_all:
        a_.alloc(nc * sz);
        fill_in(a_, nc, 0, 0);
        same_or_fresh(nc);
        break;
      default:
        throw InvalidUsage(std::string("no case for ") + name(k_.coll));
    }
  }

  Request issue(Comm& c, Issue how, device::Stream st) override {
    const void* s = twin(send_);
    void* r = twin(recv_);
    const size_t n = k_.count;
    const bool on = how == Issue::stream, async = how == Issue::async;
    switch (k_.coll) {
      case Collective::all_reduce:
        if (on) return c.all_reduce(s, r, n, D, k_.op, st);
        if (async) return c.all_reduce_async(s, r, n, D, k_.op);
        c.all_reduce(s, r, n, D, k_.op);
        break;
      case Collective::reduce_scatter:
        if (on) return c.reduce_scatter(s, r, n, D, k_.op, st);
        if (async) return c.reduce_scatter_async(s, r, n, D, k_.op);
        c.reduce_scatter(s, r, n, D, k_.op);
        break;
      case Collective::all_gather:
        if (on) return c.all_gather(s, r, n, D, st);
        if (async) return c.all_gather_async(s, r, n, D);
        c.all_gather(s, r, n, D);
        break;
      case Collective::broadcast:
        if (on) return c.broadcast(s, r, n, D, k_.root, st);
        if (async) return c.broadcast_async(s, r, n, D, k_.root);
        c.broadcast(s, r, n, D, k_.root);
        break;
      case Collective::reduce:
        if (on) return c.reduce(s, r, n, D, k_.op, k_.root, st);
        if (async) return c.reduce_async(s, r, n, D, k_.op, k_.root);
        c.reduce(s, r, n, D, k_.op, k_.root);
        break;
      case Collective::all_to_all:
        if (on) return c.all_to_all(s, r, n, D, st);
        if (async) return c.all_to_all_async(s, r, n, D);
        c.all_to_all(s, r, n, D);
        break;
      default: break;
    }
    return {};
  }
  void upload(device::Stream st) override {
    a_.to_device(st);
    b_.to_device(st);
  }
  void download(device::Stream st) override {
    a_.to_host(st);
    b_.to_host(st);
  }

  std::string check() override { return expected_.check(a_, b_, recv_); }

 private:
  // The pointer the library gets for one of ours: its device twin in device mode.
  template <class P>
  P* twin(P* p) const {
    return static_cast<P*>(b_.holds(p) ? b_.on_device(p) : a_.on_device(p));
  }

  CollCall k_;
  Expected<D> expected_;
  Buf a_, b_;  // the send (or in-place) buffer and a separate output
  const void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace

std::unique_ptr<CaseBase> make_case(Comm& comm, Collective coll, DataType t, ReduceOp op, size_t count, bool inplace,
                                    int root, uint64_t seed) {
  const CollCall k{coll, op, count, inplace, root, comm.rank(), comm.size(), seed};
#define STRATA_CASE(D) \
  case DataType::D:    \
    return std::make_unique<CollCase<DataType::D>>(k);
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
    STRATA_CASE(float8_e4m3)
    STRATA_CASE(float8_e5m2)
  }
#undef STRATA_CASE
  return nullptr;
}

std::vector<CaseSpec> build_matrix(const Options& o, int n) {
  std::vector<CaseSpec> v;
  uint64_t pick = 0;  // deterministic rotation for choices that need not be exhaustive
  std::vector<bool> placements;  // in place or not
  if (o.out) placements.push_back(false);
  if (o.in) placements.push_back(true);
  auto add = [&](Collective c, DataType t, ReduceOp op, size_t count, bool exhaustive_roots,
                 const std::vector<bool>& places) {
    for (bool ip : places) {
      if (!info(c).has_root) {
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
      std::vector<ReduceOp> ops = info(c).has_op ? o.ops : std::vector<ReduceOp>{ReduceOp::sum};
      if (o.sizes) {
        for (ReduceOp op : ops)
          for (size_t s : *o.sizes) add(c, t, op, s, s <= 7, placements);
      }
      if (o.quick) {
        const size_t cb = 4096 / sz;
        for (ReduceOp op : ops) {
          // every root at tiny sizes (for every op of reduce would be redundant: sum only)
          bool ex = !info(c).has_op || op == ReduceOp::sum || ops.size() == 1;
          for (size_t s : {size_t(0), size_t(1), size_t(7)}) add(c, t, op, s, ex, placements);
          for (size_t s : {size_t(1001), cb - 1, cb, cb + 1}) add(c, t, op, s, false, placements);
        }
      }
      if (o.medium) {
        // sum plus one other op per type (rotating), one placement per size (rotating)
        std::vector<ReduceOp> mops;
        if (info(c).has_op) {
          for (ReduceOp op : ops)
            if (op == ReduceOp::sum) mops.push_back(op);
          std::vector<ReduceOp> others;
          for (ReduceOp op : ops)
            if (op != ReduceOp::sum) others.push_back(op);
          if (!others.empty()) mops.push_back(others[static_cast<int>(t) % others.size()]);
        } else {
          mops.push_back(ReduceOp::sum);
        }
        const auto& pl = placements;
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

Request start_case(Comm& c, CaseBase& cs, Issue how, device::Stream stream) {
  const bool device = device_mode().on;
  if (how != Issue::stream) stream = nullptr;  // the calls without a stream use the default one
  if (device) cs.upload(stream);
  Request r = cs.issue(c, how, stream);
  if (device) cs.download(stream);
  return r;
}

void finish_case(Issue how, device::Stream stream) {
  if (device_mode().on) device::stream_synchronize(how == Issue::stream ? stream : nullptr);
}

void run_case(Comm& comm, Reporter& rep, CaseBase& cs, size_t index) {
  // Host: every third case async. Device: mostly on the worker's stream, and in turn the
  // forms without a stream (the default stream).
  static constexpr Issue kHost[] = {Issue::blocking, Issue::blocking, Issue::async};
  static constexpr Issue kDevice[] = {Issue::stream, Issue::async, Issue::stream, Issue::blocking};
  const Issue how = device_mode().on ? kDevice[index % 4] : kHost[index % 3];
  const char* how_text = how == Issue::async ? " (async)" : how == Issue::stream ? " (on a stream)" : "";
  double t0 = mono_s();
  cs.prepare();
  double t1 = mono_s();
  try {
    Request r = start_case(comm, cs, how, device_mode().stream);
    finish_case(how, device_mode().stream);
    r.wait();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL rank %d/%d: %s%s: threw %s\n", rep.rank, rep.n, cs.desc.c_str(), how_text, e.what());
    exit(2);
  }
  double t2 = mono_s();
  std::string err = cs.check();
  if (rep.verbose)
    printf("timing %s: prepare %.3f s, run %.3f s, check %.3f s\n", cs.desc.c_str(), t1 - t0, t2 - t1,
           mono_s() - t2);
  rep.result(cs.desc + how_text, err);
}

}  // namespace strata_test
