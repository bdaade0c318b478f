#include "plan_set.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "algorithms/connections.hpp"
#include "algorithms/tuner.hpp"
#include "ground/fnv1a.hpp"
#include "ground/reduce.hpp"
#include "ground/settings.hpp"

namespace strata::sim {

namespace {

// Where a buffer starts in one rank's memory, in elements, so that copies onto themselves
// (in place) are recognised as the engine does: they are skipped.
struct Layout {
  size_t input = 0, output = 0;
  bool same_buffer;  // input and output are one allocation (in place)
};

Layout layout_of(const SimCall& call, int rank) {
  Layout l{0, 0, call.in_place};
  if (!call.in_place) return l;
  if (call.coll == Collective::all_gather) l.input = static_cast<size_t>(rank) * call.count;
  if (call.coll == Collective::reduce_scatter) l.output = static_cast<size_t>(rank) * call.count;
  return l;
}

bool same_memory(const Layout& l, Ref a, Ref b) {
  if (a.buf == b.buf) return a.offset == b.offset;
  if (!l.same_buffer || a.buf == Buf::scratch || b.buf == Buf::scratch) return false;
  auto at = [&](Ref r) { return (r.buf == Buf::input ? l.input : l.output) + r.offset; };
  return at(a) == at(b);
}

}  // namespace

CollArgs coll_args(const Cluster& c, const Hierarchy& h, const SimCall& call, int rank, const std::vector<int>* members) {
  const size_t esz = size_of(call.type);
  const int n = members ? static_cast<int>(members->size()) : c.nranks();
  auto real = [&](int i) { return members ? (*members)[static_cast<size_t>(i)] : i; };
  // Device buffers go over the ipc or staging links, which do not forward (docs/transports.md).
  const bool forward = n == 2 && !has_finalize(call.op) && c.memory == MemoryKind::host &&
                       c.levels[c.common_level(real(0), real(1))].forwards;
  return CollArgs{call.coll, call.count, esz, call.root, rank, n, call.in_place, 1, &h, forward, c.memory};
}

PlanChoice choose(const Cluster& c, const Hierarchy& h, const SimCall& call, std::optional<Algo> forced,
                  const std::vector<int>* members) {
  // A job's settings, as a communicator reads them, with STRATA_CHUNK_BYTES at its default.
  const PlanSettings settings{forced ? name(*forced) : "",
                              static_cast<size_t>(settings::find("STRATA_CHUNK_BYTES").fallback), false};
  const PlanChoice p = choose_plan(coll_args(c, h, call, 0, members), settings);
  if (forced && !p.forced)
    throw std::invalid_argument(std::string("algorithm ") + name(*forced) + " does not implement " + name(call.coll));
  return p;
}

size_t PlanSet::memory_bytes() const {
  return xfers.capacity() * sizeof(Xfer) + rounds.capacity() * sizeof(Round) + rank_first.capacity() * sizeof(uint64_t) +
         dirs.capacity() * sizeof(Dir);
}

namespace {

int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

// The rank shift by which `choice`'s plans may be folded on this cluster: a period of both
// the plans and the fabric that divides the ranks, else 0.
int fold_period(const Cluster& c, const PlanChoice& choice) {
  const int n = c.nranks(), plans = rotation_period(choice.algo, choice.args);
  if (plans <= 0) return 0;
  const long both = static_cast<long>(plans) / gcd(plans, c.rotation_period()) * c.rotation_period();
  return both < n && n % both == 0 ? static_cast<int>(both) : 0;
}

std::string count_text(double x, const char* one = "", const char* many = "") {
  char b[48];
  std::snprintf(b, sizeof b, x >= 1e9 ? "%.1f billion%s" : x >= 1e6 ? "%.1f million%s" : "%.0f%s",
                x >= 1e9 ? x / 1e9 : x >= 1e6 ? x / 1e6 : x, x == 1 ? one : many);
  return b;
}

std::string bytes_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, x >= 1e9 ? "%.1f GB" : "%.0f MB", x >= 1e9 ? x / 1e9 : x / 1e6);
  return b;
}

// Refuses before building when rank 0's plan, times the ranks to hold, is beyond the budget.
void check_budget(const Plan& p, const SimCall& call, int held, int n) {
  double transfers = 0, rounds = 0, widest = 0;
  for (size_t round = 0; round < p.rounds(); ++round) {
    double here = 0;
    for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i)
      here += p.steps[i].kind == StepKind::recv_reduce_send ? 2 : p.steps[i].peer >= 0;
    transfers += here, rounds += here > 0, widest = std::max(widest, here);
  }
  const double bytes = held * (transfers * sizeof(PlanSet::Xfer) + rounds * sizeof(PlanSet::Round));
  if (bytes <= kMaxPlanBytes && held * widest <= kMaxRoundTransfers) return;
  std::string what = std::string(p.algo) + " " + name(call.coll) + " on " + std::to_string(n) + " ranks: a rank's plan has " +
                     count_text(transfers, " transfer", " transfers") + " in " + count_text(rounds, " round", " rounds") +
                     ", up to " + count_text(widest) + " at once; over the " + std::to_string(held) + " ranks simulated" +
                     (held < n ? " (the rest by rotation symmetry)" : "") + " that is " + bytes_text(bytes) +
                     " of plans and " + count_text(held * widest) + " transfers in flight, beyond strata-sim's budget (" +
                     bytes_text(kMaxPlanBytes) + ", " + count_text(kMaxRoundTransfers) + ")";
  if (widest >= n - 1) what += ": every rank talks to every other at once, which grows with the square of the ranks";
  throw PlanTooLarge(what + "; simulate fewer ranks (--ranks)");
}

}  // namespace

PlanSet build_plan_set(const Cluster& c, const Hierarchy& h, const SimCall& call, const PlanChoice& choice) {
  PlanSet s = compact_plans(
      c, call,
      [&](int r) {
        CollArgs a = choice.args;
        a.rank = r;
        return build_plan(choice.algo, a);
      },
      fold_period(c, choice));
  s.choice = choice;
  return s;
}

PlanSet compact_plans(const Cluster& c, const SimCall& call, const std::function<Plan(int)>& plan_of, int period) {
  PlanSet s;
  const int n = c.nranks(), held = period ? period : n;
  s.period = held;
  const size_t esz = size_of(call.type);
  std::unordered_map<uint64_t, uint32_t> dir_ids;
  // The direction real `from` -> real `to`, as from's representative sees it.
  auto key = [&](int from, int to) {
    const int rep = from % held;
    return std::pair<int, int>{rep, mod(to - (from - rep), n)};
  };
  auto dir = [&](int from, int to) {
    const auto [rep, to_real] = key(from, to);
    const uint64_t k = static_cast<uint64_t>(rep) << 32 | static_cast<uint32_t>(to_real);
    auto [it, added] = dir_ids.emplace(k, static_cast<uint32_t>(s.dirs.size()));
    if (added) s.dirs.push_back({rep, to_real % held, to_real, -1});
    return it->second;
  };
  auto local_of = [&](const Step& st, const Layout& mem) {
    const double bytes = static_cast<double>(st.count * esz);
    switch (st.kind) {
      case StepKind::copy: return same_memory(mem, st.src, st.dst) ? 0.0 : bytes / c.copy_Bps;
      case StepKind::reduce: return bytes / c.reduce_Bps;
      // A pass over the data where the op has one (avg), else nothing.
      case StepKind::finalize: return has_finalize(call.op) && n > 1 ? bytes / c.reduce_Bps : 0.0;
      default: return 0.0;
    }
  };
  // What folding needs equal between rank r and r + period: per round, the elements each
  // kind of local step passes over (a copy onto itself: none) and the transfers (kind,
  // peer relative to the rank, elements).
  auto shape_of = [&](const Plan& p, int r) {
    const Layout mem = layout_of(call, r);
    uint64_t hash = kFnv1aBasis;
    for (size_t round = 0; round < p.rounds(); ++round) {
      uint64_t local[3] = {0, 0, 0};  // copy, reduce, finalize
      hash = fnv1a_u64(~uint64_t{0}, hash);
      for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i) {
        const Step& st = p.steps[i];
        if (st.kind == StepKind::copy) local[0] += same_memory(mem, st.src, st.dst) ? 0 : st.count;
        if (st.kind == StepKind::reduce) local[1] += st.count;
        if (st.kind == StepKind::finalize) local[2] += st.count;
        if (st.peer < 0) continue;
        hash = fnv1a_u64(static_cast<uint64_t>(st.kind) << 56 ^ static_cast<uint64_t>(mod(st.peer - r, n)) << 32, hash);
        hash = fnv1a_u64(st.count, hash);
      }
      for (uint64_t x : local) hash = fnv1a_u64(x, hash);
    }
    return hash;
  };
  std::vector<uint64_t> shapes;
  for (int r = 0; r < held; ++r) {
    const Plan p = plan_of(r);
    if (r == 0) {
      s.algo = p.algo;
      check_budget(p, call, held, n);
    }
    if (held < n) shapes.push_back(shape_of(p, r));
    s.steps += p.steps.size();
    std::vector<int> peers = overlay_peers(r, n);
    for (const Step& st : p.steps)
      if (st.peer >= 0 && st.peer != r) peers.push_back(st.peer);
    std::sort(peers.begin(), peers.end());
    const int connections = static_cast<int>(std::unique(peers.begin(), peers.end()) - peers.begin());
    s.connections_max = std::max(s.connections_max, connections);
    s.connections_mean += static_cast<double>(connections) / held;
    s.largest_plan_bytes = std::max(s.largest_plan_bytes, p.steps.capacity() * sizeof(Step) + p.round_begin.capacity() * 4);
    const Layout mem = layout_of(call, r);
    s.rank_first.push_back(s.rounds.size());
    for (size_t round = 0; round < p.rounds(); ++round) {
      double local = 0;
      s.rounds.push_back({s.xfers.size(), 0});
      for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i) {
        const Step& st = p.steps[i];
        const uint64_t bytes = st.count * esz;
        local += local_of(st, mem);
        switch (st.kind) {
          case StepKind::send: s.xfers.push_back({bytes, dir(r, st.peer), PlanSet::send}); break;
          case StepKind::recv:
          case StepKind::recv_reduce: s.xfers.push_back({bytes, dir(st.peer, r), PlanSet::recv}); break;
          case StepKind::recv_reduce_send:
            s.xfers.push_back({bytes, dir(st.peer, r), PlanSet::recv});
            s.xfers.push_back({bytes, dir(r, st.peer), PlanSet::forward});
            break;
          default: break;
        }
        if (st.peer == r) throw std::logic_error("rank " + std::to_string(r) + "'s plan sends to itself");
        if (st.peer >= n) throw std::logic_error("rank " + std::to_string(r) + "'s plan names rank " + std::to_string(st.peer));
      }
      // A round with nothing to do ends at once in the engine: not held (a chain's rank idles
      // through most of its n + chunks rounds).
      if (local == 0 && s.xfers.size() == s.rounds.back().first) s.rounds.pop_back();
      else s.rounds.back().local_s = local;
    }
  }
  // The claim folding rests on, checked on the next period's ranks and the last period's.
  for (int r = held; r < n; r = r + 1 == std::min(2 * held, n) ? std::max(2 * held, n - held) : r + 1)
    if (shape_of(plan_of(r), r) != shapes[static_cast<size_t>(r % held)])
      throw std::logic_error(std::string(s.algo) + " " + name(call.coll) + ": rank " + std::to_string(r) +
                             "'s plan is not rank " + std::to_string(r % held) + "'s moved on by " +
                             std::to_string(r - r % held) + " ranks, as algorithms/ claims (rotation_period)");
  s.steps *= static_cast<size_t>(n / held);
  s.rank_first.push_back(s.rounds.size());
  s.rounds.push_back({s.xfers.size(), 0});
  for (PlanSet::Dir& d : s.dirs) {
    const auto [rep, to_real] = key(d.to_real, d.from);
    auto it = dir_ids.find(static_cast<uint64_t>(rep) << 32 | static_cast<uint32_t>(to_real));
    d.reverse = it == dir_ids.end() ? -1 : static_cast<int32_t>(it->second);
  }
  return s;
}

}  // namespace strata::sim
