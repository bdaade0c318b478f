#include "plan_set.hpp"

#include <stdexcept>
#include <unordered_map>

#include "algorithms/tuner.hpp"
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

PlanSet build_plan_set(const Cluster& c, const Hierarchy& h, const SimCall& call, const PlanChoice& choice) {
  PlanSet s = compact_plans(c, call, [&](int r) {
    CollArgs a = choice.args;
    a.rank = r;
    return build_plan(choice.algo, a);
  });
  s.choice = choice;
  return s;
}

PlanSet compact_plans(const Cluster& c, const SimCall& call, const std::function<Plan(int)>& plan_of) {
  PlanSet s;
  const int n = c.nranks();
  const size_t esz = size_of(call.type);
  std::unordered_map<uint64_t, uint32_t> dir_ids;
  auto dir = [&](int from, int to) {
    const uint64_t key = static_cast<uint64_t>(from) << 32 | static_cast<uint32_t>(to);
    auto [it, added] = dir_ids.emplace(key, static_cast<uint32_t>(s.dirs.size()));
    if (added) s.dirs.push_back({from, to, -1});
    return it->second;
  };
  for (int r = 0; r < n; ++r) {
    const Plan p = plan_of(r);
    if (r == 0) s.algo = p.algo;
    s.steps += p.steps.size();
    s.largest_plan_bytes = std::max(s.largest_plan_bytes, p.steps.capacity() * sizeof(Step) + p.round_begin.capacity() * 4);
    const Layout mem = layout_of(call, r);
    s.rank_first.push_back(s.rounds.size());
    for (size_t round = 0; round < p.rounds(); ++round) {
      double local = 0;
      s.rounds.push_back({s.xfers.size(), 0});
      for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i) {
        const Step& st = p.steps[i];
        const uint64_t bytes = st.count * esz;
        switch (st.kind) {
          case StepKind::copy:
            if (!same_memory(mem, st.src, st.dst)) local += bytes / c.copy_Bps;
            break;
          case StepKind::reduce: local += bytes / c.reduce_Bps; break;
          case StepKind::finalize:  // a pass over the data where the op has one (avg), else nothing
            if (has_finalize(call.op) && n > 1) local += bytes / c.reduce_Bps;
            break;
          case StepKind::send: s.xfers.push_back({bytes, dir(r, st.peer), PlanSet::send}); break;
          case StepKind::recv:
          case StepKind::recv_reduce: s.xfers.push_back({bytes, dir(st.peer, r), PlanSet::recv}); break;
          case StepKind::recv_reduce_send:
            s.xfers.push_back({bytes, dir(st.peer, r), PlanSet::recv});
            s.xfers.push_back({bytes, dir(r, st.peer), PlanSet::forward});
            break;
        }
        if (st.peer == r) throw std::logic_error("rank " + std::to_string(r) + "'s plan sends to itself");
        if (st.peer >= n) throw std::logic_error("rank " + std::to_string(r) + "'s plan names rank " + std::to_string(st.peer));
      }
      s.rounds.back().local_s = local;
    }
  }
  s.rank_first.push_back(s.rounds.size());
  s.rounds.push_back({s.xfers.size(), 0});
  for (PlanSet::Dir& d : s.dirs) {
    auto it = dir_ids.find(static_cast<uint64_t>(d.to) << 32 | static_cast<uint32_t>(d.from));
    d.reverse = it == dir_ids.end() ? -1 : static_cast<int32_t>(it->second);
  }
  return s;
}

}  // namespace strata::sim
