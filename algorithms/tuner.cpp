#include "algorithms/tuner.hpp"

#include <algorithm>
#include <cmath>

namespace strata {

namespace {

// Rate of a separate local pass over memory (a reduction dst op= src, or a copy), from
// memory and while its operands stay in a core's cache; reductions fused into a receive
// (recv_reduce) cost nothing extra in this model. In cache, the two-rank direct all_reduce
// (a local pass after the exchange) measured faster than the ring up to 8 KiB and slower
// from 16 KiB: at 0.5 us a message, that puts a pass at about 16 GB/s
// (docs/benchmarks.md, "Measured choices"). Ranks that
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
// choices there were measured with, docs/benchmarks.md, "Measured choices").
// Nor does one direction stream alone: the other ranks want the same cores (4 ranks on
// 2 cores: a broadcast tree's hop ran nearer the shm link's exchange rate than its one-way
// rate, docs/benchmarks.md, "Measured choices").
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

// Ranks per node (largest node).
int node_size(const Hierarchy& h) {
  if (h.levels.empty()) return 1;
  int g = 1;
  std::vector<int> size(static_cast<size_t>(h.levels[0].ngroups), 0);  // counted: O(n) at 16,384 ranks
  for (int id : h.levels[0].group) g = std::max(g, ++size[static_cast<size_t>(id)]);
  return g;
}

// The ladder a call climbs: rung 0 the node (a link per rank), then each level above (a
// node's share of its links, as STRATA_LINK_MODEL gives them), up to the first level that
// holds every rank, or the outermost links (`top`). A message between ranks whose smallest
// common group is of rung j crosses rung j's link.
struct Rung {
  double groups;           // groups at this rung (1 at the last)
  LinkModel link;
  double nodes_below = 1;  // nodes per group of the rung below: their shares make that group's uplink
  double ranks_below = 1;  // ranks per group of the rung below
};
struct Ladder {
  std::vector<Rung> rungs;
  const Hierarchy* h = nullptr;  // whose levels are rungs 0, 1, ...: pairs of ranks are placed exactly; null: by distance
  int n = 1;
  int g = 1;  // ranks per node
  // Copies of the call that run at once, one per rank of a node, sharing the node's links
  // (the flat part of a hierarchical plan: a set of owners per segment); 1: the call itself.
  double streams = 1;
  bool oversubscribed = false;  // more ranks than CPUs on a machine

  double ranks(size_t j) const { return n / rungs[j].groups; }  // per group, on average
  // The rung a message to the rank `d` away (in rank order) crosses, for most ranks: the
  // lowest whose groups hold more than d ranks.
  size_t crossed(double d) const {
    size_t j = 0;
    while (j + 1 < rungs.size() && ranks(j) <= d) ++j;
    return j;
  }
  // The rate of each of `flows` flows per group of the rung below that cross rung j at once
  // (every copy of the call alike): the least share of each uplink on the way.
  double rate(size_t j, double flows) const {
    if (j == 0) return rungs[0].link.bandwidth_Bps;  // a rank's own port
    double r = HUGE_VAL;
    for (size_t i = 1; i <= j; ++i) {
      const Rung& u = rungs[i];
      r = std::min(r, u.link.bandwidth_Bps * u.nodes_below / (std::min(flows, u.ranks_below) * streams));
    }
    return r;
  }
};

// The overhead per message when STRATA_LINK_MODEL gives it, else none (see LinkModel).
double told_overhead(const LinkModel& l) { return std::max(0.0, l.overhead_s); }

Ladder ladder_of(const Hierarchy& h, int n) {
  Ladder l;
  l.h = &h;
  l.n = n;
  l.oversubscribed = h.oversubscribed;
  l.g = node_size(h);
  auto add = [&](double groups, const LinkModel& link) {
    Rung r{groups, as_run(link, h)};
    if (!l.rungs.empty()) r.nodes_below = l.rungs[0].groups / l.rungs.back().groups, r.ranks_below = n / l.rungs.back().groups;
    l.rungs.push_back(r);
  };
  for (const Level& v : h.levels) {
    add(v.ngroups, v.link);
    if (v.ngroups == 1) return l;
  }
  add(1, h.levels.empty() ? kShmLink : h.top);
  return l;
}

// What one algorithm's call costs, term by term, in seconds; the prediction is their sum.
// Each term is a sum over the steps that run one after another. (Connections made on first
// use will be one more term: the peers a plan reaches, times what a connection costs.)
struct Cost {
  double latency = 0;    // alpha: per message, for the messages that follow each other
  double wire = 0;       // bytes over links, at the share of the link each flow gets
  double local = 0;      // separate passes over memory (reductions, copies)
  double scheduler = 0;  // ranks that outnumber the CPUs waiting for each other
  double total() const { return latency + wire + local + scheduler; }
  Cost& operator+=(const Cost& o) {
    latency += o.latency, wire += o.wire, local += o.local, scheduler += o.scheduler;
    return *this;
  }
  Cost operator*(double k) const { return {latency * k, wire * k, local * k, scheduler * k}; }
};

// Every rank moves `bytes` to the rank `d` away (by exclusive or, or by subtraction), all at
// once. Above the node, the ranks whose partner lies outside their group (min(d, its
// ranks) of them) share its uplink.
Cost exchange(const Ladder& l, double d, double bytes) {
  const size_t j = l.crossed(d);
  return {l.rungs[j].link.latency_s, bytes / l.rate(j, d)};
}

// The rung a message between ranks a and b crosses: that of their smallest common group.
size_t rung_between(const Ladder& l, int a, int b) {
  for (size_t j = 0; j + 1 < l.rungs.size(); ++j)
    if (l.h->levels[j].group[static_cast<size_t>(a)] == l.h->levels[j].group[static_cast<size_t>(b)]) return j;
  return l.rungs.size() - 1;
}

// One step in which every rank r with a partner p = partner(r) >= 0 sends it `bytes`, all at
// once (ranks placed as the hierarchy places them). The pair crossing the highest rung
// sets the step: its latency, and its flow's share of each uplink on the way, which the
// flows leaving the same group share (the busiest group's count).
template <class Partner>
Cost pair_step(const Ladder& l, double bytes, Partner partner) {
  const size_t top = l.rungs.size() - 1;
  std::vector<std::vector<int>> leaving(top + 1);  // rung i >= 1: flows out of each group of rung i - 1
  for (size_t i = 1; i <= top; ++i) leaving[i].assign(static_cast<size_t>(l.rungs[i - 1].groups), 0);
  size_t worst = 0;
  for (int r = 0; r < l.n; ++r) {
    const int p = partner(r);
    if (p < 0) continue;
    const size_t j = rung_between(l, r, p);
    worst = std::max(worst, j);
    for (size_t i = 1; i <= j; ++i) ++leaving[i][static_cast<size_t>(l.h->levels[i - 1].group[static_cast<size_t>(r)])];
  }
  double rate = l.rungs[0].link.bandwidth_Bps;
  if (worst > 0) rate = HUGE_VAL;
  for (size_t i = 1; i <= worst; ++i) {
    const double most = *std::max_element(leaving[i].begin(), leaving[i].end());
    rate = std::min(rate, l.rungs[i].link.bandwidth_Bps * l.rungs[i].nodes_below / (most * l.streams));
  }
  return {l.rungs[worst].link.latency_s, bytes / rate};
}

// One step of a ring in rank order, `bytes` per rank. The ring's edges cross every rung
// (inside nodes, between nodes, ...), one edge per group leaving it, so a flow crossing a
// rung has its group's uplink to itself (or a node's share of it, for each of the copies
// of a hierarchical plan's flat part). In step after step a rank waits for its
// predecessor, so the ring settles at the mean of its edges' delays (a round trip of the
// cycle, per edge), or at its slowest edge's transmission if that is longer (a link
// carries no more than its rate).
Cost ring_step(const Ladder& l, double bytes) {
  std::vector<double> edges(l.rungs.size(), 0);  // ring edges first joined at each rung
  if (l.h) {
    for (int r = 0; r < l.n; ++r) ++edges[rung_between(l, r, (r + 1) % l.n)];
  } else {  // in rank order: one edge leaves each group
    double below = l.n;
    for (size_t j = 0; j < l.rungs.size(); ++j) {
      const double leaving = l.rungs[j].groups > 1 ? l.rungs[j].groups : 0;
      edges[j] = below - leaving, below = leaving;
    }
  }
  double mean_latency = 0, mean_wire = 0, slowest = 0;
  for (size_t j = 0; j < l.rungs.size(); ++j) {
    if (edges[j] == 0) continue;
    const double wire = bytes / l.rate(j, 1);
    mean_latency += edges[j] * l.rungs[j].link.latency_s / l.n;
    mean_wire += edges[j] * wire / l.n;
    slowest = std::max(slowest, wire);
  }
  // With more ranks than CPUs a rank runs its step when the scheduler gets to it, after its
  // predecessor's: the steps do not overlap, and each costs its slowest edge (on the
  // emulated cluster the ring's 64 KiB calls took longer than simulated with the overlap,
  // docs/benchmarks.md, "Measured choices"; docs/simulator.md).
  if (l.oversubscribed) {
    double worst = 0;
    for (size_t j = 0; j < l.rungs.size(); ++j)
      if (edges[j] > 0) worst = std::max(worst, l.rungs[j].link.latency_s);
    return {worst, slowest};
  }
  return mean_latency + mean_wire >= slowest ? Cost{mean_latency, mean_wire} : Cost{0, slowest};
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
// reduce_scatter, one round, faster than the ring or Bruck's; from 2 KiB per peer the ring
// caught up, and at 8 KiB it was faster; docs/benchmarks.md, "Measured choices".)
// Charged for reduce_scatter and all_gather only: for all_reduce the same charge picked
// the direct plan over recursive doubling, and that measured slower.
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

// Every rank sends `each` bytes to every other at once. The busiest link: a rank's own
// port (n - 1 messages), or a group's uplink, which carries what its ranks send beyond it.
// A rank posts its n - 1 messages one after another, each costing the overhead of the
// link it takes (the messages fly meanwhile: the round lasts the longer of the two); where
// STRATA_LINK_MODEL does not give the overhead, each message costs a whole latency
// (measured so on the emulated cluster, docs/benchmarks.md, "Measured choices").
Cost all_pairs(const Ladder& l, double each) {
  const LinkModel& top = l.rungs.back().link;
  Cost c{(l.n - 1) * top.latency_s, (l.n - 1) * each / l.rungs[0].link.bandwidth_Bps};
  if (top.overhead_s >= 0) {
    double posting = 0, below = 1;  // below: ranks of the group of the rung below
    for (size_t j = 0; j < l.rungs.size(); ++j) posting += (l.ranks(j) - below) * told_overhead(l.rungs[j].link), below = l.ranks(j);
    c.latency = std::max(top.latency_s, posting);
  }
  for (size_t j = 1; j < l.rungs.size(); ++j) {
    const Rung& u = l.rungs[j];
    c.wire = std::max(c.wire, u.ranks_below * (l.n - u.ranks_below) * each * l.streams / (u.link.bandwidth_Bps * u.nodes_below));
  }
  return c;
}

// A flat algorithm over all ranks of the ladder (the hierarchy does not shape its plan).
Cost flat_cost(Algo algo, Collective coll, double bytes, const Ladder& l, Pass pass, size_t* chunk) {
  const int n = l.n;
  if (n <= 1) return {};
  const LinkModel& cross = l.rungs.back().link;
  switch (coll) {
    case Collective::all_reduce:
      if (algo == Algo::ring) return ring_step(l, bytes / n) * (2.0 * (n - 1));
      if (algo == Algo::direct) {  // everyone's vector to everyone, then n - 1 local reductions
        Cost c = all_pairs(l, bytes);
        c.local = (n - 1) * pass(bytes);
        return c;
      }
      {
        const Fold fold(n);
        const int p = fold.pow2;
        // A step of the ranks taking part with the partner `mask` away by exclusive or.
        auto step = [&](int mask, double each) {
          if (!l.h) return exchange(l, mask, each);
          return pair_step(l, each, [&](int r) { const int m = fold.member(r); return m < 0 ? -1 : fold.rank_of(m ^ mask); });
        };
        Cost c;
        if (n > p) {  // the first 2(n - p) ranks fold in, and get the result back
          c += l.h ? pair_step(l, bytes, [&](int r) { return fold.paired(r) && r % 2 == 0 ? r + 1 : -1; }) : exchange(l, 1, bytes);
          c += l.h ? pair_step(l, bytes, [&](int r) { return fold.paired(r) && r % 2 == 1 ? r - 1 : -1; }) : exchange(l, 1, bytes);
        }
        for (int d = 1; d < p; d *= 2) {
          if (algo == Algo::rabenseifner) {  // halving then doubling: S d / p at distance d, twice
            c += step(d, bytes * d / p) * 2;
          } else {  // recursive doubling: the whole vector at every distance, reduced in a pass
            c += step(d, bytes);
            c.local += pass(bytes);
          }
        }
        return c;
      }
    case Collective::reduce_scatter:
    case Collective::all_gather: {  // bytes: the whole gathered vector
      const bool rs = coll == Collective::reduce_scatter;
      if (algo == Algo::ring) return ring_step(l, bytes / n) * (n - 1.0);
      if (algo == Algo::recursive_doubling) {  // Bruck's all_gather: min(d, n - d) blocks to the rank d back
        Cost c;
        for (int d = 1; d < n; d *= 2) {
          const double each = std::min(d, n - d) * bytes / n;
          c += l.h ? pair_step(l, each, [&](int r) { return mod(r - d, n); }) : exchange(l, d, each);
        }
        c.local = pass(bytes);  // the rotation into place
        return c;
      }
      Cost c = all_pairs(l, bytes / n);  // direct
      if (rs) c.local = pass((n - 1) * bytes / n);
      return c;
    }
    case Collective::broadcast:
    case Collective::reduce:
      if (algo == Algo::tree) return {tree_time(bytes, n, cross), 0};
      return {chain_time(bytes, n, cross, chunk), 0};
    case Collective::all_to_all: return {(n - 1) * (cross.latency_s + bytes / n / cross.bandwidth_Bps), 0};
    case Collective::barrier: return {ceil_log2(n) * cross.latency_s, 0};
    case Collective::send:
    case Collective::recv: return {cross.latency_s + bytes / cross.bandwidth_Bps, 0};
  }
  return {};
}

// The ladder of a set of K ranks, one per group of rung `from`, and that rung's links above:
// the owners of a segment in a hierarchical plan's flat part. Every rank of a node is such
// an owner at once (`streams`), so they share the node's part of every uplink.
Ladder across(const Ladder& l, size_t from) {
  Ladder a;
  a.n = static_cast<int>(std::lround(l.rungs[from].groups));
  a.streams = l.g;
  a.oversubscribed = l.oversubscribed;
  a.rungs.push_back(Rung{static_cast<double>(a.n), l.rungs[from + 1].link});  // one rank per group
  for (size_t j = from + 1; j < l.rungs.size(); ++j) a.rungs.push_back(Rung{std::max(1.0, l.rungs[j].groups), l.rungs[j].link});
  return a;
}

// The flat algorithm a hierarchical plan runs among `k` ranks on `bytes` of the API's count
// (all_gather, reduce_scatter: one rank's block) (algorithms/hierarchical.cpp: flat_choice,
// the size's default).
Algo flat_algo(const CollArgs& a, Collective coll, double bytes, int k) {
  CollArgs s = a;
  s.coll = coll;
  s.count = static_cast<size_t>(bytes / a.elem_size);
  s.nranks = k;
  s.hier = nullptr;
  const Algo algo = default_algo(s);
  return algo == Algo::hierarchical ? Algo::ring : algo;
}

// The hierarchical all_reduce (algorithms/hierarchical.cpp): at each rung below the last,
// every group hands each segment to its owner (the owners reduce) and gets it back; the
// node's g ranks all own segments, so above rung 0 they share the node's links. Between
// the last rung's groups, the owners of a segment all-reduce it with the flat algorithm
// (g streams per node). A large call on one level runs as P pieces in a software
// pipeline: the network's rounds of one piece overlap the node's of the next.
Cost hierarchical_all_reduce(const CollArgs& a, const Ladder& l, double bytes, Pass pass) {
  const size_t last = l.rungs.size() - 1;
  Cost c;
  if (!a.in_place) c.local = pass(bytes);  // the input copied into the output first
  double len = bytes;  // each owner's segment at this rung
  Cost inside;
  for (size_t j = 0; j < last; ++j) {
    const double m = (j == 0 ? l.n : l.rungs[j - 1].groups) / l.rungs[j].groups;  // members per group
    if (m <= 1) continue;
    const double moved = (m - 1) / m * len * (j == 0 ? 1 : l.g);  // over the rank's port, or the node's share
    // A rank sends to the m - 1 others in each phase, one message after another.
    const LinkModel& link = l.rungs[j].link;
    inside += Cost{2 * std::max(link.latency_s, (m - 1) * told_overhead(link)), 2 * moved / link.bandwidth_Bps,
                   pass((m - 1) / m * len)};
    len /= m;
  }
  const Ladder k = across(l, last - 1);
  const Cost net = flat_cost(flat_algo(a, Collective::all_reduce, len, k.n), Collective::all_reduce, len, k, pass, nullptr);
  const double pieces = a.count * a.elem_size >= (4u << 20) && last == 1 ? std::min(16.0, std::floor(bytes / (1 << 20))) : 1;
  if (pieces <= 1) {
    c += inside;
    c += net;
    return c;
  }
  // Pipelined: the network's rounds of all pieces run together (the ring's rounds, one more
  // per piece), the node's phases of all but the first and last piece behind them. Each
  // round posts a message per piece in it: where posting them all takes longer than the
  // rounds' latencies and bytes, it sets the time.
  const Cost piece_inside = inside * (1 / pieces);
  const LinkModel& top = l.rungs[last].link;
  const double ring_rounds = 2.0 * (k.n - 1), latency = (ring_rounds + pieces - 1) * top.latency_s;
  const double wire = std::max(net.wire, inside.wire + inside.local - piece_inside.wire - piece_inside.local);
  const double posting = pieces * ring_rounds * told_overhead(top);
  c += piece_inside;
  c.latency += latency + std::max(0.0, posting - latency - wire);
  c.wire += wire;
  return c;
}

// The hierarchical all_gather / reduce_scatter over one level of equal nodes: the ranks of
// equal local index exchange across nodes (g streams per node), then each rank shares its
// K blocks with the g - 1 others of its node (reduce_scatter: the reverse, the node's
// blocks reduced in passes). `bytes`: the whole gathered vector.
Cost hierarchical_gather(const CollArgs& a, const Ladder& l, double bytes, Pass pass) {
  const double g = l.g, K = l.n / g, block = bytes / l.n;
  const Ladder k = across(l, 0);
  const Algo flat = flat_algo(a, a.coll, block, static_cast<int>(K));
  Cost c = flat_cost(flat, a.coll, K * block, k, pass, nullptr);
  const LinkModel& node = l.rungs[0].link;
  c += Cost{std::max(node.latency_s, (g - 1) * K * told_overhead(node)), (g - 1) * K * block / node.bandwidth_Bps,
            pass(K * block) * (a.coll == Collective::reduce_scatter ? g : 1)};
  return c;
}

Cost cost(Algo algo, const CollArgs& a) {
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
  const Pass pass{!h.oversubscribed, device ? h.device.bandwidth_Bps : 0};
  const int n = a.nranks;
  double bytes = static_cast<double>(a.count) * a.elem_size;
  if (a.coll == Collective::reduce_scatter || a.coll == Collective::all_gather || a.coll == Collective::all_to_all)
    bytes *= n;
  const Ladder l = ladder_of(h, n);
  const bool gathers = a.coll == Collective::reduce_scatter || a.coll == Collective::all_gather;
  if (algo == Algo::hierarchical) {
    if (hierarchical_is_ring(a)) algo = Algo::ring;  // as the plan runs
    else if (a.coll == Collective::all_reduce) return hierarchical_all_reduce(a, l, bytes, pass);
    else if (gathers) return hierarchical_gather(a, l, bytes, pass);
    else if (a.coll == Collective::broadcast || a.coll == Collective::reduce) {
      // Across the node leaders, then inside the nodes (or the reverse).
      const int k = static_cast<int>(l.rungs[0].groups);
      const Algo inner = bytes < (64 << 10) ? Algo::tree : Algo::ring;
      const LinkModel out = l.rungs[std::min<size_t>(1, l.rungs.size() - 1)].link;
      return {(inner == Algo::tree ? tree_time(bytes, k, out) + tree_time(bytes, l.g, l.rungs[0].link)
                                   : chain_time(bytes, k, out, nullptr) + chain_time(bytes, l.g, l.rungs[0].link, nullptr)),
              0};
    } else {
      algo = Algo::direct;
    }
  }
  Cost c = flat_cost(algo, a.coll, bytes, l, pass, nullptr);
  // reduce_scatter/all_gather: `count` is one rank's block, what each peer exchanges.
  if (h.oversubscribed && n > 1 && gathers && static_cast<double>(a.count) * a.elem_size < kOversubscribedShortBytes)
    c.scheduler = waiting_rounds(algo, n) * kOversubscribedRound_s;
  return c;
}

// Connections are made on need (core/connector): a plan that sends to every other rank
// makes n - 1 of them per rank, so its first call costs n - 1 connection setups. On host
// memory each is a control connection and a link of 1 + STRATA_TCP_NSOCKS descriptors over
// tcp: beyond 256 ranks, more than the 1024 a cluster's `ulimit -n` often allows. On device
// memory (ibverbs queue pairs, UCX endpoints, IPC) descriptors do not bound it, the setups
// do: beyond 1,024 ranks. The tuner leaves such plans to communicators within these
// bounds (STRATA_ALGO still forces them); the other plans' peers grow as O(log n) or
// O(G + log N) (algorithms/connections.hpp; docs/architecture.md, "What a rank holds").
constexpr int kAllPairsMaxPeersHost = 255, kAllPairsMaxPeersDevice = 1023;

bool connects_too_many(Algo algo, const CollArgs& a) {
  // Direct all_to_all has no alternative, and the direct barrier is a dissemination (2 log n peers).
  const bool all_pairs = algo == Algo::direct && (a.coll == Collective::all_reduce || a.coll == Collective::reduce_scatter ||
                                                  a.coll == Collective::all_gather);
  const int most = a.memory == MemoryKind::device ? kAllPairsMaxPeersDevice : kAllPairsMaxPeersHost;
  return all_pairs && a.nranks - 1 > most;
}

}  // namespace

LinkModel cross_link(const Hierarchy& h) {
  for (size_t i = 0; i < h.levels.size(); ++i)
    if (h.levels[i].ngroups == 1) return i == 0 ? h.levels[0].link : h.levels[i].link;
  return h.levels.empty() ? kShmLink : h.top;
}

double predict(Algo algo, const CollArgs& a) { return cost(algo, a).total(); }

Choice tune(const CollArgs& a) {
  Choice best{default_algo(a), HUGE_VAL, 0};
  // A device all_reduce inside one node is one-shot (direct: every rank reduces every
  // rank's data in rank order, so the results are bit-identical on every rank) while the
  // device link's latency dominates, and the ring once bandwidth does.
  const bool device_node = a.memory == MemoryKind::device && a.coll == Collective::all_reduce &&
                           (!a.hier || a.hier->levels.empty() || a.hier->levels[0].ngroups == 1);
  for (Algo algo : kAllAlgos) {
    if (!supports(algo, a.coll) || (algo == Algo::hierarchical && !hierarchy_splits(a))) continue;
    if (connects_too_many(algo, a)) continue;
    if (device_node && algo != Algo::direct && algo != Algo::ring) continue;
    // A pipelined chain needs every rank of it copying at once. With more ranks than CPUs
    // each chunk's hand-off waits for the scheduler: broadcast on 4 ranks sharing 2 cores
    // ran faster as a tree than as the tuned chain, 32 KiB-8 MiB (docs/benchmarks.md,
    // "Measured choices").
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
