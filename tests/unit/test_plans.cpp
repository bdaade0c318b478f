// Symbolic check of every plan: all ranks' plans are replayed together with no processes,
// each element carrying the set of (rank, index) contributions it holds. The result must
// hold every expected contribution exactly once, transfers must pair up in FIFO order
// with equal sizes, nothing may deadlock, and no step may touch memory outside its buffer
// or race with another transfer of its round.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "algorithms/tuner.hpp"
#include "strata/error.hpp"

namespace strata {
namespace {

using Elem = std::vector<std::pair<int, size_t>>;  // sorted multiset of contributions

struct Region {
  size_t base, size;
};

struct RankSim {
  std::vector<Elem> arena;
  Region in, out, scratch;
  Plan plan;
  size_t round = 0;  // the next round to start
  int pending = 0;

  Elem* at(Ref r, size_t n, const char* what) {
    Region g = r.buf == Buf::input ? in : r.buf == Buf::output ? out : scratch;
    EXPECT_LE(r.offset + n, g.size) << what << " step out of bounds";
    if (r.offset + n > g.size) throw std::runtime_error("out of bounds");
    return &arena[g.base + r.offset];
  }
};

struct Transfer {
  std::vector<Elem> data;  // send: snapshot at post time
  Elem* dst;               // recv
  const Elem* local;       // recv_reduce: the local operand (dst itself or disjoint)
  size_t n;
  bool reduce;
  int* pending;
  // recv_reduce_send: the send (data taken from `forwarded` once the receive is done) and
  // the receive share `done`.
  const Elem* forwarded = nullptr;
  std::shared_ptr<bool> done = nullptr;
};

Elem merge(const Elem& a, const Elem& b) {
  Elem m(a);
  m.insert(m.end(), b.begin(), b.end());
  std::sort(m.begin(), m.end());
  return m;
}

struct Case {
  Collective coll;
  Algo algo;
  int n;
  size_t count;
  int root;
  bool in_place;
  const Hierarchy* hier = nullptr;
  std::string hier_name = "";
  size_t elem_size = 4;  // only the algorithms' size thresholds look at it
  bool forward = false;  // CollArgs::forward
  // In place is each rank's own choice: even ranks in place, odd ranks not (`in_place`
  // is then ignored). The plans must still agree on the wire.
  bool mixed = false;
};

bool in_place_at(const Case& c, int r) { return c.mixed ? r % 2 == 0 : c.in_place; }

// Out of place, in place, in place on even ranks only.
constexpr int kForms[] = {0, 1, 2};
Case in_form(Case c, int form) {
  c.in_place = form == 1;
  c.mixed = form == 2;
  return c;
}

std::string describe(const Case& c) {
  return std::string(name(c.coll)) + "/" + name(c.algo) + " n=" + std::to_string(c.n) + " count=" +
         std::to_string(c.count) + " root=" + std::to_string(c.root) + (c.mixed ? " in-place on even ranks" : c.in_place ? " in-place" : "") +
         (c.hier ? " hierarchy " + c.hier_name : "") + (c.forward ? " forwarding" : "");
}

// Input and output element counts per rank, as the API defines them.
std::pair<size_t, size_t> sizes(const Case& c) {
  size_t n = static_cast<size_t>(c.n);
  switch (c.coll) {
    case Collective::reduce_scatter: return {c.count * n, c.count};
    case Collective::all_gather: return {c.count, c.count * n};
    case Collective::all_to_all: return {c.count * n, c.count * n};
    case Collective::barrier: return {0, 0};
    default: return {c.count, c.count};
  }
}

void run(const Case& c) {
  SCOPED_TRACE(describe(c));
  const int n = c.n;
  auto [in_n, out_n] = sizes(c);
  std::vector<RankSim> ranks(n);
  for (int r = 0; r < n; ++r) {
    RankSim& s = ranks[r];
    const bool in_place = in_place_at(c, r);
    CollArgs a{c.coll, c.count, c.elem_size, c.root, r, n, in_place, 3, c.hier, c.forward};
    s.plan = build_plan(c.algo, a);
    // Lay out the arena; in place, input and output share storage as the API defines.
    s.out = {0, out_n};
    size_t used = out_n;
    if (in_place && c.coll == Collective::all_gather) s.in = {static_cast<size_t>(r) * c.count, in_n};
    else if (in_place && c.coll == Collective::reduce_scatter) s.in = {0, in_n}, s.out = {static_cast<size_t>(r) * c.count, out_n}, used = in_n;
    else if (in_place) s.in = {0, in_n};
    else s.in = {used, in_n}, used += in_n;
    s.scratch = {used, s.plan.scratch_count};
    s.arena.resize(used + s.plan.scratch_count);
    for (size_t i = 0; i < in_n; ++i) s.arena[s.in.base + i] = {{r, i}};
  }
  std::map<std::pair<int, int>, std::deque<Transfer>> sends, recvs;  // (from, to)
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      RankSim& s = ranks[r];
      while (s.pending == 0 && s.round < s.plan.rounds()) {
        progress = true;
        std::vector<std::pair<size_t, size_t>> written, read;  // arena ranges of this round's transfers
        for (size_t i = s.plan.round_begin[s.round]; i < s.plan.round_end(s.round); ++i) {
          const Step& st = s.plan.steps[i];
          switch (st.kind) {
            case StepKind::copy: {
              std::vector<Elem> tmp(s.at(st.src, st.count, "copy"), s.at(st.src, st.count, "copy") + st.count);
              std::copy(tmp.begin(), tmp.end(), s.at(st.dst, st.count, "copy"));
              break;
            }
            case StepKind::reduce: {
              Elem* d = s.at(st.dst, st.count, "reduce");
              Elem* src = s.at(st.src, st.count, "reduce");
              for (size_t k = 0; k < st.count; ++k) d[k] = merge(d[k], src[k]);
              break;
            }
            case StepKind::finalize: s.at(st.dst, st.count, "finalize"); break;
            case StepKind::send: {
              Elem* src = s.at(st.src, st.count, "send");
              read.push_back({static_cast<size_t>(src - s.arena.data()), st.count});
              sends[{r, st.peer}].push_back({std::vector<Elem>(src, src + st.count), nullptr, nullptr, st.count, false, &s.pending});
              ++s.pending;
              break;
            }
            case StepKind::recv:
            case StepKind::recv_reduce:
            case StepKind::recv_reduce_send: {
              Elem* d = s.at(st.dst, st.count, "recv");
              written.push_back({static_cast<size_t>(d - s.arena.data()), st.count});
              const Elem* local = nullptr;
              std::shared_ptr<bool> done;
              if (st.kind == StepKind::recv_reduce_send) {
                // The send goes in the stream now, after the sends posted before it.
                done = std::make_shared<bool>(false);
                sends[{r, st.peer}].push_back({{}, nullptr, nullptr, st.count, false, &s.pending, d, done});
                ++s.pending;
              }
              if (st.kind != StepKind::recv) {
                local = s.at(st.src, st.count, "recv_reduce operand");
                // The operand is read while the round runs: it is the destination itself, or
                // memory nothing in this round writes.
                if (local != d) {
                  EXPECT_TRUE(local + st.count <= d || d + st.count <= local) << "operand overlaps its destination";
                  read.push_back({static_cast<size_t>(local - s.arena.data()), st.count});
                }
              }
              recvs[{st.peer, r}].push_back({{}, d, local, st.count, st.kind != StepKind::recv, &s.pending, nullptr, done});
              ++s.pending;
              break;
            }
          }
          EXPECT_NE(st.peer, r) << "a transfer to self";
        }
        ++s.round;
        // Within a round, received data must not land where another transfer reads or writes.
        for (size_t i = 0; i < written.size(); ++i) {
          auto overlaps = [&](std::pair<size_t, size_t> a) {
            return a.first < written[i].first + written[i].second && written[i].first < a.first + a.second;
          };
          for (auto& rd : read) EXPECT_FALSE(overlaps(rd)) << "round " << s.round << " receives into memory it sends";
          for (size_t j = i + 1; j < written.size(); ++j) EXPECT_FALSE(overlaps(written[j])) << "two receives overlap";
        }
      }
    }
    for (auto& [key, q] : sends) {
      auto& rq = recvs[key];
      while (!q.empty() && !rq.empty()) {
        if (q.front().forwarded && !*q.front().done) break;  // its receive has not finished
        Transfer s = std::move(q.front()), d = rq.front();
        q.pop_front();
        rq.pop_front();
        ASSERT_EQ(s.n, d.n) << "transfer " << key.first << "->" << key.second << " sizes differ";
        if (s.forwarded) s.data.assign(s.forwarded, s.forwarded + s.n);
        for (size_t k = 0; k < s.n; ++k) d.dst[k] = d.reduce ? merge(d.local[k], s.data[k]) : s.data[k];
        if (d.done) *d.done = true;
        --*s.pending;
        --*d.pending;
        progress = true;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ranks[r].pending, 0) << "rank " << r << " deadlocked in round " << ranks[r].round;
    ASSERT_GE(ranks[r].round, ranks[r].plan.rounds()) << "rank " << r << " did not finish";
  }
  for (auto& [key, q] : sends) EXPECT_TRUE(q.empty()) << "unmatched send " << key.first << "->" << key.second;

  // Expected contents of every output element.
  for (int r = 0; r < n; ++r) {
    if (c.coll == Collective::reduce && r != c.root) continue;
    RankSim& s = ranks[r];
    for (size_t i = 0; i < out_n; ++i) {
      Elem want;
      size_t blk = c.count ? i / c.count : 0, off = c.count ? i % c.count : 0;
      switch (c.coll) {
        case Collective::all_reduce:
        case Collective::reduce:
          for (int q = 0; q < n; ++q) want.push_back({q, i});
          break;
        case Collective::reduce_scatter:
          for (int q = 0; q < n; ++q) want.push_back({q, static_cast<size_t>(r) * c.count + i});
          break;
        case Collective::all_gather: want = {{static_cast<int>(blk), off}}; break;
        case Collective::broadcast: want = {{c.root, i}}; break;
        case Collective::all_to_all: want = {{static_cast<int>(blk), static_cast<size_t>(r) * c.count + off}}; break;
        case Collective::barrier:
        case Collective::send:
        case Collective::recv: break;
      }
      ASSERT_EQ(s.arena[s.out.base + i], want) << "rank " << r << " output element " << i;
    }
  }
}

TEST(Plans, EveryAlgorithmDeliversEachContributionExactlyOnce) {
  const Collective colls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast,  Collective::reduce,         Collective::all_to_all,
                              Collective::barrier};
  const auto& algos = kAllAlgos;
  int cases = 0;
  for (Collective coll : colls)
    for (Algo algo : algos) {
      if (!supports(algo, coll)) continue;
      for (int n = 1; n <= 9; ++n)
        for (size_t count : {size_t(1), size_t(2), size_t(5), size_t(13)})
          for (int root = 0; root < n; root += (n > 3 ? n - 1 : 1))
            for (int form : kForms) {
              bool rooted = coll == Collective::broadcast || coll == Collective::reduce;
              if (!rooted && root != 0) continue;
              run(in_form({coll, algo, n, count, root, false}, form));
              if (HasFatalFailure()) return;
              ++cases;
            }
    }
  EXPECT_GT(cases, 1000);
}

// Hierarchical plans on even and uneven groups and on two levels (nodes, islands).
TEST(Plans, HierarchicalOverManyHierarchies) {
  const Collective colls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast, Collective::reduce};
  const char* specs[] = {"node:1", "node:2", "node:3", "node:4", "node:2,island:2", "node:3,island:2",
                         "node:1,island:3", "node:2,rack:2,island:2"};
  int cases = 0;
  for (const char* spec : specs)
    for (int n = 2; n <= 9; ++n) {
      Hierarchy h = build_hierarchy(std::vector<std::string>(static_cast<size_t>(n), "host"), parse_hierarchy_spec(spec), "");
      for (Collective coll : colls)
        for (size_t count : {size_t(1), size_t(5), size_t(13)})
          for (int root = 0; root < n; root += (n > 3 ? n / 2 : 1))
            for (int form : kForms) {
              bool rooted = coll == Collective::broadcast || coll == Collective::reduce;
              if (!rooted && root != 0) continue;
              run(in_form({coll, Algo::hierarchical, n, count, root, false, &h, spec}, form));
              if (HasFatalFailure()) return;
              ++cases;
            }
    }
  EXPECT_GT(cases, 1000);
}

// Two-rank ring all-reduces of >= 4 MiB run as pipelined 1 MiB pieces (1 MiB "elements").
TEST(Plans, PipelinedTwoRankRing) {
  for (size_t count : {size_t(4), size_t(13), size_t(40)})
    for (int form : kForms) {
      run(in_form({Collective::all_reduce, Algo::ring, 2, count, 0, false, nullptr, "", size_t(1) << 20}, form));
      if (HasFatalFailure()) return;
    }
  CollArgs a{Collective::all_reduce, 13, size_t(1) << 20, 0, 0, 2, false, 3, nullptr};
  EXPECT_EQ(build_plan(Algo::ring, a).rounds(), 14u) << "13 pieces of 2 rounds, overlapped";
}

// Over links that forward, a two-rank ring all-reduce out of place reduces and sends back
// in one step per piece; in place keeps the plan above.
TEST(Plans, ForwardingTwoRankRing) {
  for (size_t elem : {size_t(4), size_t(1) << 20})
    for (size_t count : {size_t(1), size_t(4), size_t(13), size_t(40)})
      for (int form : kForms) {
        run(in_form({Collective::all_reduce, Algo::ring, 2, count, 0, false, nullptr, "", elem, true}, form));
        if (HasFatalFailure()) return;
      }
  CollArgs a{Collective::all_reduce, 13, size_t(1) << 20, 0, 0, 2, false, 3, nullptr, true};
  long forwarding = 0;  // 13 one-element pieces: one rank reduces each
  for (a.rank = 0; a.rank < 2; ++a.rank) {
    Plan p = build_plan(Algo::ring, a);
    EXPECT_EQ(p.rounds(), 1u);
    forwarding += std::count_if(p.steps.begin(), p.steps.end(), [](const Step& s) { return s.kind == StepKind::recv_reduce_send; });
  }
  EXPECT_EQ(forwarding, 13) << "one forwarding receive per piece";
  a.rank = 1;
  a.in_place = true;
  for (const Step& s : build_plan(Algo::ring, a).steps) EXPECT_NE(s.kind, StepKind::recv_reduce_send);
  a.in_place = false;
  a.forward = false;
  for (const Step& s : build_plan(Algo::ring, a).steps) EXPECT_NE(s.kind, StepKind::recv_reduce_send);
}

// Large all-reduces on even nodes are pipelined pieces (1 MiB "elements" make a 13-element
// vector large enough).
TEST(Plans, PipelinedHierarchicalAllReduce) {
  for (const char* spec : {"node:2", "node:3", "node:4"})
    for (int n : {4, 6, 8, 9, 12}) {
      Hierarchy h = build_hierarchy(std::vector<std::string>(static_cast<size_t>(n), "host"), parse_hierarchy_spec(spec), "");
      for (size_t count : {size_t(13), size_t(40)})
        for (int form : kForms) {
          run(in_form({Collective::all_reduce, Algo::hierarchical, n, count, 0, false, &h, spec, size_t(1) << 20}, form));
          if (HasFatalFailure()) return;
        }
    }
  Hierarchy h = build_hierarchy(std::vector<std::string>(4, "host"), parse_hierarchy_spec("node:2"), "");
  Plan p = build_plan(Algo::hierarchical, {Collective::all_reduce, 40, size_t(1) << 20, 0, 0, 4, false, 1, &h});
  Plan one = build_plan(Algo::hierarchical, {Collective::all_reduce, 40, 4, 0, 0, 4, false, 1, &h});
  EXPECT_GT(p.rounds(), one.rounds()) << "the large vector should have been cut into pipelined pieces";
}

TEST(Plans, HierarchicalAllReduceUsesTheHierarchy) {
  // 4 ranks in 2 nodes: only one rank per node may talk across nodes per segment, so each
  // rank sends across nodes exactly half of what a flat ring would.
  Hierarchy h = build_hierarchy(std::vector<std::string>(4, "host"), parse_hierarchy_spec("node:2"), "");
  const size_t count = 1000;
  for (int r = 0; r < 4; ++r) {
    Plan p = build_plan(Algo::hierarchical, {Collective::all_reduce, count, 4, 0, r, 4, false, 64, &h});
    EXPECT_STREQ(p.algo, "hierarchical");
    size_t across = 0;
    for (const Step& s : p.steps)
      if (s.kind == StepKind::send && h.levels[0].group[s.peer] != h.levels[0].group[r]) across += s.count;
    EXPECT_EQ(across, count / 2) << "rank " << r;
  }
}

TEST(Oversubscribed, CountsEachMachinesRanksAgainstTheUnionOfTheirCpus) {
  const std::vector<uint64_t> cpu0{1}, cpu1{2}, both{3};
  EXPECT_FALSE(oversubscribed({{"a", both}, {"a", both}}));
  EXPECT_TRUE(oversubscribed({{"a", both}, {"a", both}, {"a", both}}));
  EXPECT_FALSE(oversubscribed({{"a", cpu0}, {"a", cpu1}})) << "bound to separate cores";
  EXPECT_TRUE(oversubscribed({{"a", cpu0}, {"a", cpu0}})) << "bound to the same core";
  EXPECT_FALSE(oversubscribed({{"a", cpu0}, {"b", cpu0}})) << "CPU 0 of two machines";
  EXPECT_TRUE(oversubscribed({{"a", both}, {"b", cpu0}, {"b", cpu0}})) << "one machine of two is enough";
  EXPECT_FALSE(oversubscribed({{"a", {0, 1}}, {"a", {1, 0}}})) << "CPU 64 and CPU 0";
}

TEST(Tuner, BroadcastAvoidsThePipelinedChainOnOversubscribedMachines) {
  Hierarchy h = build_hierarchy(std::vector<std::string>(4, "host"), {}, "");
  CollArgs a{Collective::broadcast, size_t(2) << 20, 1, 0, 0, 4, false, 1, &h};
  EXPECT_EQ(tune(a).algo, Algo::ring) << "a large broadcast pipelines along a chain when every rank has a core";
  CollArgs ar = a;
  ar.coll = Collective::all_reduce;
  const Algo all_reduce_choice = tune(ar).algo;
  h.oversubscribed = true;
  EXPECT_EQ(tune(a).algo, Algo::tree);
  EXPECT_EQ(tune(ar).algo, all_reduce_choice) << "only broadcast changes";
}

TEST(Tuner, ShortReduceScatterAndAllGatherTakeOneRoundOnOversubscribedMachines) {
  Hierarchy h = build_hierarchy(std::vector<std::string>(4, "host"), {}, "");
  for (Collective coll : {Collective::reduce_scatter, Collective::all_gather}) {
    CollArgs a{coll, 32, 4, 0, 0, 4, false, 1, &h};  // 128 B per peer
    h.oversubscribed = false;
    EXPECT_NE(tune(a).algo, Algo::direct) << name(coll);
    h.oversubscribed = true;
    EXPECT_EQ(tune(a).algo, Algo::direct) << name(coll);
    a.count = 4096;  // 16 KiB per peer: bandwidth matters more than rounds
    EXPECT_EQ(tune(a).algo, Algo::ring) << name(coll);
  }
  CollArgs ar{Collective::all_reduce, 8, 4, 0, 0, 4, false, 1, &h};
  h.oversubscribed = false;
  const Algo choice = tune(ar).algo;
  h.oversubscribed = true;
  EXPECT_EQ(tune(ar).algo, choice) << "all_reduce is not charged";
}

// Device all_reduce inside a node: one-shot (direct) while the device link's latency
// dominates, the ring once bandwidth does; the crossover follows STRATA_LINK_MODEL's
// "device" model: with n ranks, direct costs (n-1)(a + 2S/B) and the ring 2(n-1)(a + S/(nB)),
// so they meet at S = a*B*n / (2(n-1)) (on 2 ranks, a*B).
TEST(Tuner, DeviceAllReduceInANodeIsOneShotWhenSmallAndRingWhenLarge) {
  for (const char* model : {"", "device:20us:50GB"}) {
    Hierarchy h = build_hierarchy(std::vector<std::string>(4, "host"), {}, model);
    for (int n : {2, 4}) {
      h.nranks = n;
      h.levels[0].group.assign(static_cast<size_t>(n), 0);
      const double crossover = h.device.latency_s * h.device.bandwidth_Bps * n / (2.0 * (n - 1));
      CollArgs a{Collective::all_reduce, 2, 4, 0, 0, n, false, 1, &h};
      a.memory = MemoryKind::device;
      EXPECT_EQ(tune(a).algo, Algo::direct) << model << " n=" << n << ": 8 bytes";
      a.count = static_cast<size_t>(crossover / 4 * 0.8);
      EXPECT_EQ(tune(a).algo, Algo::direct) << model << " n=" << n << ": " << a.count * 4 << " bytes";
      a.count = static_cast<size_t>(crossover / 4 * 1.25);
      EXPECT_EQ(tune(a).algo, Algo::ring) << model << " n=" << n << ": " << a.count * 4 << " bytes";
      a.memory = MemoryKind::host;  // host memory keeps its own models and choices
      EXPECT_NE(tune(a).algo, Algo::direct) << model << " n=" << n;
    }
  }
  EXPECT_EQ(build_hierarchy({"a", "a"}, {}, "device:20us:50GB").device.bandwidth_Bps, 50e9);
}

// STRATA_LINK_MODEL's fourth field: the overhead per message. Told, a direct exchange costs
// its sends' overheads (or a latency, if longer); untold, a latency per peer.
TEST(Tuner, DirectChargesEachMessageItsOverheadWhenTold) {
  EXPECT_EQ(build_hierarchy({"a", "b"}, {}, "top:8us:50GB:1us").top.overhead_s, 1e-6);
  EXPECT_EQ(build_hierarchy({"a", "b"}, {}, "top:8us:50GB:0").top.overhead_s, 0);
  EXPECT_LT(build_hierarchy({"a", "b"}, {}, "top:8us:50GB").top.overhead_s, 0) << "not told";
  EXPECT_THROW(build_hierarchy({"a", "b"}, {}, "top:8us:50GB:1us:2us"), InvalidArgument);
  EXPECT_THROW(build_hierarchy({"a", "b"}, {}, "top:8us:50GB:fast"), InvalidArgument);
  std::vector<std::string> hosts;
  for (int r = 0; r < 64; ++r) hosts.push_back("h" + std::to_string(r));
  for (const char* model : {"top:8us:50GB", "top:8us:50GB:1us"}) {
    const Hierarchy h = build_hierarchy(hosts, {}, model);
    const CollArgs a{Collective::all_gather, 1, 4, 0, 0, 64, false, 1, &h};  // 4 B to each of 63 peers
    const double wire = 63 * 4 / kShmLink.bandwidth_Bps;  // a rank's port, slower here than its node's uplink
    const double want = h.top.overhead_s < 0 ? 63 * 8e-6 : 63 * 1e-6;  // 63 latencies, or 63 overheads (> 8 us)
    EXPECT_NEAR(predict(Algo::direct, a), want + wire, 1e-9) << model;
  }
}

// Rank r's plan as strata-sim's rotation symmetry sees it: per round, the transfers in
// order (kind, peer relative to r, elements) and the elements of each kind of local step.
using Shape = std::vector<std::pair<std::vector<std::tuple<StepKind, int, size_t>>, std::map<StepKind, size_t>>>;
Shape shape_of(const Plan& p, int r, int n) {
  Shape s(p.rounds());
  for (size_t round = 0; round < p.rounds(); ++round)
    for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i) {
      const Step& st = p.steps[i];
      if (st.peer >= 0) s[round].first.emplace_back(st.kind, mod(st.peer - r, n), st.count);
      else s[round].second[st.kind] += st.count;
    }
  return s;
}

// Every rotation_period claim, checked plan by plan: rank r + s's plan is rank r's moved on by s.
TEST(Plans, RotationSymmetryClaimsHold) {
  std::map<Algo, int> claims;
  int two_level = 0;
  const Collective colls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast,  Collective::reduce,         Collective::all_to_all,
                              Collective::barrier};
  // No hierarchy, nodes of g consecutive ranks, and two levels (islands of nodes).
  std::vector<std::pair<int, std::string>> cases;
  for (int n : {3, 4, 5, 6, 8, 9, 12, 16})
    for (int g : {1, 2, 3, 4})
      if (n % g == 0 && (g == 1 || n / g >= 2)) cases.push_back({n, g > 1 ? "node:" + std::to_string(g) : ""});
  for (auto [n, spec] : {std::pair<int, std::string>{8, "node:2,island:2"}, {12, "node:2,island:3"}, {16, "node:2,island:2"},
                         {18, "node:3,island:2"}, {24, "node:2,island:3"}, {12, "node:2,island:2"}})
    cases.push_back({n, spec});
  for (const auto& [n, spec] : cases) {
      const int g = spec.empty() ? 1 : std::stoi(spec.substr(5));
      const Hierarchy h = build_hierarchy(std::vector<std::string>(static_cast<size_t>(n), "host"), parse_hierarchy_spec(spec), "");
      for (Algo algo : kAllAlgos)
        for (Collective coll : colls)
          for (size_t esz : {size_t(4), size_t(1) << 20})  // 1 MiB elements: sizes the hierarchical plans pipeline
            for (size_t count : {size_t(1), size_t(7), static_cast<size_t>(n) * 5, static_cast<size_t>(16 * n * 4),
                                 static_cast<size_t>(n * n * 6)}) {
              if (!supports(algo, coll)) continue;
              CollArgs a{coll, count, esz, 0, 0, n, false, 3, g > 1 ? &h : nullptr};
              const int s = rotation_period(algo, a);
              if (s == 0) continue;
              ++claims[algo];
              two_level += algo == Algo::hierarchical && coll == Collective::all_reduce && h.levels.size() == 2;
              const std::string what = std::string(name(algo)) + " " + name(coll) + " n=" + std::to_string(n) + " " +
                                       spec + " count " + std::to_string(count) + " x " + std::to_string(esz) +
                                       " B: period " + std::to_string(s);
              ASSERT_EQ(n % s, 0) << what;
              std::vector<Shape> shapes;
              for (int r = 0; r < n; ++r) {
                a.rank = r;
                shapes.push_back(shape_of(build_plan(algo, a), r, n));
              }
              for (int r = 0; r < n; ++r) ASSERT_TRUE(shapes[static_cast<size_t>(r)] == shapes[static_cast<size_t>((r + s) % n)]) << what << ", rank " << r;
            }
    }
  for (Algo a : {Algo::ring, Algo::direct, Algo::recursive_doubling, Algo::hierarchical})
    EXPECT_GT(claims[a], 10) << name(a) << ": its claims should be checked here";
  EXPECT_GT(two_level, 4) << "the hierarchical all_reduce over two levels should be among the claims";
  // The pipelined hierarchical all_reduce is among them: nodes of 3, 4 of them, 16 pieces.
  const Hierarchy h = build_hierarchy(std::vector<std::string>(12, "host"), parse_hierarchy_spec("node:3"), "");
  EXPECT_EQ(rotation_period(Algo::hierarchical, {Collective::all_reduce, 16 * 12 * 4, size_t(1) << 20, 0, 0, 12, false, 3, &h}), 3);
}

TEST(Plans, DefaultChoiceIsAlwaysSupported) {
  for (int c = 0; c <= static_cast<int>(Collective::barrier); ++c)
    for (size_t count : {size_t(1), size_t(1000), size_t(1) << 24})
      for (int n : {1, 2, 3, 8, 64}) {
        CollArgs a{static_cast<Collective>(c), count, 4, 0, 0, n, false, 1024};
        EXPECT_TRUE(supports(default_algo(a), a.coll)) << name(a.coll);
      }
}

}  // namespace
}  // namespace strata
