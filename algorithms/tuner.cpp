#include "algorithms/tuner.hpp"

#include <algorithm>
#include <cmath>

namespace strata {

namespace {

// Rate of a separate local pass over memory (a reduction dst op= src, or a copy), from
// memory and while its operands stay in a core's cache; reductions fused into a receive
// (recv_reduce) cost nothing extra in this model. In cache, the two-rank direct all_reduce
// (a local pass after the exchange) measured faster than the ring up to 8 KiB and slower
// from 16 KiB on the 2-vCPU VM: at 0.5 us a message, a pass at about 16 GB/s. Ranks that
// share a core (oversubscribed) evict each other's data: from memory, whatever the size.
constexpr double kReduceBps = 4e9, kReduceInCacheBps = 16e9;
constexpr double kCacheBytes = 1 << 20;
// On device memory a local pass runs at the device link's rate (Hierarchy::device), cache aside.
struct Pass {
  bool cached;             // a pass this small finds its operands in cache
  double device_Bps = 0;   // > 0: a pass over device memory
  double operator()(double bytes) const {
    if (device_Bps > 0) return bytes / device_Bps;
    return bytes / (cached && bytes <= kCacheBytes ? kReduceInCacheBps : kReduceBps);
  }
};

// With more ranks than CPUs a message waits for the scheduler to run its receiver: the
// latency of a round is at least a hand-off (4 ranks on 2 cores; the value the tuner's
// choices there were measured with, docs/benchmarks.md).
// Nor does one direction stream alone: the other ranks want the same cores (4 ranks on
// 2 cores: a broadcast tree's hop of 256 KiB-1 MiB ran at 4.8-6.2 GB/s, nearer the shm
// link's exchange rate than its one-way 12 GB/s).
constexpr double kOversubscribedLatency_s = 2e-6;
LinkModel as_run(LinkModel l, const Hierarchy& h) {
  if (h.oversubscribed) {
    l.latency_s = std::max(l.latency_s, kOversubscribedLatency_s);
    l.stream_Bps = 0;
  }
  return l;
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Ranks per node (largest node) and number of nodes.
void node_shape(const Hierarchy& h, int* g, int* k) {
  *k = h.levels.empty() ? h.nranks : h.levels[0].ngroups;
  *g = 1;
  if (h.levels.empty()) return;
  std::vector<int> size(static_cast<size_t>(h.levels[0].ngroups), 0);  // counted: O(n) at 16,384 ranks
  for (int id : h.levels[0].group) *g = std::max(*g, ++size[static_cast<size_t>(id)]);
}

// Hierarchy of the node leaders: the levels above the node.
LinkModel above_node_link(const Hierarchy& h) {
  for (size_t i = 1; i < h.levels.size(); ++i)
    if (h.levels[i].ngroups == 1) return h.levels[i].link;
  return h.top;
}

// A chain streams one direction at a time: the link's one-way rate.
double chain_time(double bytes, int n, const LinkModel& l, size_t* chunk) {
  if (n <= 1) return 0;
  const double B = l.one_way_Bps();
  // (S/C + n - 2)(alpha + C/B) is smallest at C = sqrt(S * alpha * B / (n - 2)).
  double c = n > 2 ? std::sqrt(bytes * l.latency_s * B / (n - 2)) : bytes;
  c = std::clamp(c, 4096.0, std::max(bytes, 4096.0));
  if (chunk) *chunk = static_cast<size_t>(c);
  return (std::ceil(bytes / c) + n - 2) * (l.latency_s + c / B);
}

// With more ranks than CPUs, every round in which a rank waits for a peer also waits for
// the scheduler to run that peer: a round of short messages costs about a context switch
// or two on top of them. (4 ranks on 2 cores, 32 B-2 KiB: direct all_gather and
// reduce_scatter, one round, 1.06-1.23x faster than the ring or Bruck's; from 2 KiB per
// peer on the ring caught up, and at 8 KiB it was 2-3x faster; docs/benchmarks.md.)
// Charged for reduce_scatter and all_gather only: for all_reduce the same charge picked
// the direct plan over recursive doubling, and that measured 0.68-0.84x.
constexpr double kOversubscribedRound_s = 5e-6;
constexpr double kOversubscribedShortBytes = 2048;  // per peer: shorter messages pay the rounds

// Rounds of a reduce_scatter or all_gather in which a rank waits for a peer.
int waiting_rounds(Algo algo, int n) {
  switch (algo) {
    case Algo::direct: return 1;
    case Algo::ring: return n - 1;
    case Algo::recursive_doubling: return ceil_log2(n);  // Bruck's all_gather
    default: return 0;
  }
}

double tree_time(double bytes, int n, const LinkModel& l) { return ceil_log2(n) * (l.latency_s + bytes / l.one_way_Bps()); }

double flat_time(Algo algo, Collective coll, double bytes, int n, const LinkModel& l, Pass reduce_s, size_t* chunk) {
  const double a = l.latency_s, B = l.bandwidth_Bps;
  if (n <= 1) return 0;
  switch (coll) {
    case Collective::all_reduce:
      if (algo == Algo::ring) return 2.0 * (n - 1) * (a + bytes / n / B);
      // Every peer costs its own message: n-1 latencies, not one.
      if (algo == Algo::direct) return (n - 1) * (a + bytes / B + reduce_s(bytes));
      {
        const int p = Fold(n).pow2;
        if (algo == Algo::rabenseifner) {
          double fold = n > p ? 2 * (a + bytes / B) : 0;
          return fold + 2 * ceil_log2(p) * a + 2.0 * (p - 1) / p * bytes / B;
        }
        int steps = ceil_log2(p) + (n > p ? 2 : 0);  // recursive doubling
        return steps * (a + bytes / B + reduce_s(bytes));
      }
    case Collective::reduce_scatter:
    case Collective::all_gather:  // bytes: the whole gathered vector
      if (algo == Algo::ring) return (n - 1) * (a + bytes / n / B);
      if (algo == Algo::recursive_doubling)  // Bruck's all-gather: log rounds, then one local rotation
        return ceil_log2(n) * a + (n - 1) * bytes / n / B + reduce_s(bytes);
      return (n - 1) * a + (n - 1) * bytes / n / B + (coll == Collective::reduce_scatter ? reduce_s((n - 1) * bytes / n) : 0);
    case Collective::broadcast:
    case Collective::reduce:
      if (algo == Algo::tree) return tree_time(bytes, n, l);
      return chain_time(bytes, n, l, chunk);
    case Collective::all_to_all: return (n - 1) * (a + bytes / n / B);
    case Collective::barrier: return ceil_log2(n) * a;
    case Collective::send:
    case Collective::recv: return a + bytes / B;
  }
  return 0;
}

}  // namespace

LinkModel cross_link(const Hierarchy& h) {
  for (size_t i = 0; i < h.levels.size(); ++i)
    if (h.levels[i].ngroups == 1) return i == 0 ? h.levels[0].link : h.levels[i].link;
  return h.levels.empty() ? kShmLink : h.top;
}

double predict(Algo algo, const CollArgs& a) {
  Hierarchy one_host;
  if (!a.hier) {
    one_host.nranks = a.nranks;
    one_host.levels.push_back({"node", std::vector<int>(static_cast<size_t>(a.nranks), 0), 1, kShmLink});
  }
  // Device buffers inside a node move over the device link (IPC); above it, staged
  // through host memory over the same network as host buffers.
  Hierarchy on_device;
  const bool device = a.memory == MemoryKind::device;
  if (device) {
    on_device = a.hier ? *a.hier : one_host;
    if (!on_device.levels.empty()) on_device.levels[0].link = on_device.device;
  }
  const Hierarchy& h = device ? on_device : a.hier ? *a.hier : one_host;
  const Pass reduce_s{!h.oversubscribed, device ? h.device.bandwidth_Bps : 0};
  const int n = a.nranks;
  double bytes = static_cast<double>(a.count) * a.elem_size;
  if (a.coll == Collective::reduce_scatter || a.coll == Collective::all_gather || a.coll == Collective::all_to_all)
    bytes *= n;
  if (algo != Algo::hierarchical) {
    // reduce_scatter/all_gather: `count` is one rank's block, what each peer exchanges.
    const bool short_rounds = h.oversubscribed && n > 1 &&
                              (a.coll == Collective::reduce_scatter || a.coll == Collective::all_gather) &&
                              static_cast<double>(a.count) * a.elem_size < kOversubscribedShortBytes;
    return flat_time(algo, a.coll, bytes, n, as_run(cross_link(h), h), reduce_s, nullptr) +
           (short_rounds ? waiting_rounds(algo, n) * kOversubscribedRound_s : 0);
  }

  int g, k;
  node_shape(h, &g, &k);
  const LinkModel in = as_run(h.levels[0].link, h), out = above_node_link(h);
  const double fg = (g - 1.0) / g;
  switch (a.coll) {
    case Collective::all_reduce:
      // g concurrent rings of k, sharing each node's link: 2(k-1) steps of S/k bytes per node.
      return 2 * (in.latency_s + fg * bytes / in.bandwidth_Bps) + fg * reduce_s(bytes) +
             2.0 * (k - 1) * (out.latency_s + bytes / k / out.bandwidth_Bps);
    case Collective::reduce_scatter:
    case Collective::all_gather:
      return in.latency_s + fg * bytes / in.bandwidth_Bps + (k - 1) * (out.latency_s + bytes / k / out.bandwidth_Bps);
    case Collective::broadcast:
    case Collective::reduce: {
      Algo inner = bytes < (64 << 10) ? Algo::tree : Algo::ring;
      return flat_time(inner, a.coll, bytes, k, out, reduce_s, nullptr) + flat_time(inner, a.coll, bytes, g, in, reduce_s, nullptr);
    }
    default: return flat_time(Algo::direct, a.coll, bytes, n, as_run(cross_link(h), h), reduce_s, nullptr);
  }
}

Choice tune(const CollArgs& a) {
  Choice best{default_algo(a), HUGE_VAL, 0};
  // A device all_reduce inside one node is one-shot (direct: every rank reduces every
  // rank's data in rank order, so the results are bit-identical on every rank) while the
  // device link's latency dominates, and the ring once bandwidth does.
  const bool device_node = a.memory == MemoryKind::device && a.coll == Collective::all_reduce &&
                           (!a.hier || a.hier->levels.empty() || a.hier->levels[0].ngroups == 1);
  for (Algo algo : kAllAlgos) {
    if (!supports(algo, a.coll) || (algo == Algo::hierarchical && !hierarchy_splits(a))) continue;
    if (device_node && algo != Algo::direct && algo != Algo::ring) continue;
    // A pipelined chain needs every rank of it copying at once. With more ranks than CPUs
    // each chunk's hand-off waits for the scheduler: broadcast on 4 ranks sharing 2 cores
    // ran 1.2-4x faster as a tree than as the tuned chain, 32 KiB-8 MiB (docs/benchmarks.md).
    if (algo == Algo::ring && a.coll == Collective::broadcast && a.hier && a.hier->oversubscribed) continue;
    double t = predict(algo, a);
    if (t < best.predicted_s) best = {algo, t, 0};
  }
  if (best.algo == Algo::ring && (a.coll == Collective::broadcast || a.coll == Collective::reduce)) {
    double bytes = static_cast<double>(a.count) * a.elem_size;
    chain_time(bytes, a.nranks, a.hier ? as_run(cross_link(*a.hier), *a.hier) : kShmLink, &best.chunk_bytes);
  }
  return best;
}

}  // namespace strata
