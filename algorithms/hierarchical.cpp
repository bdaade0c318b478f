// Hierarchical algorithms: compositions of flat plans over the levels of the hierarchy.
//
// all_reduce: reduce-scatter inside each local group (each member owns some segments),
// all-reduce of each segment across groups among its owners (one concurrent stream per
// local rank; recursively over the next level), all-gather inside each local group.
// Groups may be uneven: with G = the largest local group, a group of g members gives
// segment s to member s % g.
// broadcast / reduce: across group leaders, then inside groups (or the reverse).
// all_gather / reduce_scatter: across groups among ranks of equal local index, then
// inside groups; these need equal groups of consecutive ranks, else they use the ring.
#include <algorithm>
#include <optional>
#include <span>

#include "algorithms/algorithms.hpp"
#include "algorithms/compose.hpp"

namespace strata {

namespace {

// A set of ranks and, for each level still above them, each member's group at that level.
struct Group {
  std::vector<int> ranks;                   // real ranks, ascending
  std::vector<std::vector<int>> level_of;   // level_of[i][m]: group of ranks[m] at level i
};

Group whole(const CollArgs& a) {
  Group g;
  for (int r = 0; r < a.nranks; ++r) g.ranks.push_back(r);
  for (const Level& l : a.hier->levels) g.level_of.push_back(l.group);
  return g;
}

int index_in(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

// Group ids of the innermost remaining level, numbered in id order: slot[id] is the
// group's index, or -1 where no member has that id. Counted, not sorted: ids are group
// numbers below the hierarchy's rank count, and this runs several times per rank when
// plans are built for every rank (strata-sim builds 16,384).
std::vector<int> group_slots(const std::vector<int>& ids, int* groups) {
  const int top = ids.empty() ? -1 : *std::max_element(ids.begin(), ids.end());
  std::vector<int> slot(static_cast<size_t>(top + 1), -1);
  for (int id : ids) slot[static_cast<size_t>(id)] = 0;
  *groups = 0;
  for (int& s : slot)
    if (s == 0) s = (*groups)++;
  return slot;
}

// Members per local group (in id order).
std::vector<int> group_sizes(const Group& g) {
  int groups = 0;
  std::vector<int> slot = group_slots(g.level_of[0], &groups), size(static_cast<size_t>(groups), 0);
  for (int id : g.level_of[0]) ++size[static_cast<size_t>(slot[static_cast<size_t>(id)])];
  return size;
}

// Local groups of the innermost remaining level, by id: group k's member indices (in
// order) are members[begin[k] .. begin[k+1]). One allocation, not one per group: this runs
// for every rank when plans are built for every rank.
struct Groups {
  std::vector<int> members, begin;
  size_t size() const { return begin.size() - 1; }
  std::span<const int> operator[](size_t k) const {
    return {members.data() + begin[k], static_cast<size_t>(begin[k + 1] - begin[k])};
  }
};

Groups local_groups(const Group& g) {
  int groups = 0;
  const std::vector<int>& ids = g.level_of[0];
  const std::vector<int> slot = group_slots(ids, &groups);
  Groups out;
  out.begin.assign(static_cast<size_t>(groups) + 1, 0);
  for (int id : ids) ++out.begin[static_cast<size_t>(slot[static_cast<size_t>(id)]) + 1];
  for (size_t k = 1; k < out.begin.size(); ++k) out.begin[k] += out.begin[k - 1];
  std::vector<int> next(out.begin.begin(), out.begin.end() - 1);
  out.members.resize(ids.size());
  for (size_t m = 0; m < ids.size(); ++m)
    out.members[static_cast<size_t>(next[static_cast<size_t>(slot[static_cast<size_t>(ids[m])])]++)] = static_cast<int>(m);
  return out;
}

bool contains(std::span<const int> v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Drops levels that do not split this set: one group for everyone, or one rank per group.
Group simplify(Group g) {
  while (!g.level_of.empty()) {
    const size_t groups = group_sizes(g).size();
    if (groups == 1) {
      g.level_of.clear();
    } else if (groups == g.ranks.size()) {
      g.level_of.erase(g.level_of.begin());
    } else {
      break;
    }
  }
  return g;
}

Group subset(const Group& g, std::span<const int> members, size_t from_level) {
  Group s;
  for (int m : members) s.ranks.push_back(g.ranks[static_cast<size_t>(m)]);
  for (size_t i = from_level; i < g.level_of.size(); ++i) {
    std::vector<int> ids;
    for (int m : members) ids.push_back(g.level_of[i][static_cast<size_t>(m)]);
    s.level_of.push_back(ids);
  }
  return s;
}

CollArgs sub_args(const CollArgs& a, Collective coll, size_t count, const Group& g, int me, int root, bool in_place) {
  CollArgs s = a;
  s.coll = coll;
  s.count = count;
  s.rank = index_in(g.ranks, me);
  s.nranks = static_cast<int>(g.ranks.size());
  s.root = root;
  s.in_place = in_place;
  s.hier = nullptr;
  return s;
}

// The flat algorithm for a set of ranks with no hierarchy left.
Algo flat_choice(const CollArgs& s) {
  Algo algo = default_algo(s);
  return algo == Algo::hierarchical ? Algo::ring : algo;
}

// `forced`: use this algorithm whatever the size (pipelining needs the same rounds for
// every segment).
void flat(Plan& p, const CollArgs& a, Collective coll, const Group& g, size_t count, int root, Ref in, Ref out,
          Ref scratch, bool keep_finalize, std::optional<Algo> forced = std::nullopt) {
  CollArgs s = sub_args(a, coll, count, g, a.rank, root, in.buf == out.buf && in.offset == out.offset);
  append(p, build_plan(forced.value_or(flat_choice(s)), s), {g.ranks, in, out, scratch, keep_finalize});
}

// ---- all_reduce, in place on output[off, off+len) ----

void all_reduce_rec(Plan& p, const CollArgs& a, Group g, size_t off, size_t len,
                    std::optional<Algo> forced = std::nullopt) {
  g = simplify(std::move(g));
  const Ref out{Buf::output, off};
  if (g.level_of.empty()) return flat(p, a, Collective::all_reduce, g, len, 0, out, out, {Buf::scratch, 0}, true, forced);

  const Groups groups = local_groups(g);
  const int me = index_in(g.ranks, a.rank);
  std::span<const int> mine;
  size_t segs = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (contains(groups[k], me)) mine = groups[k];
    segs = std::max(segs, groups[k].size());
  }
  const int nseg = static_cast<int>(segs), gsize = static_cast<int>(mine.size());
  auto seg_ref = [&](int s) { return Ref{Buf::output, off + block_begin(len, nseg, s)}; };
  auto seg_len = [&](int s) { return block_size(len, nseg, s); };
  auto owner = [&](std::span<const int> grp, int s) { return grp[static_cast<size_t>(s % static_cast<int>(grp.size()))]; };

  // Phase 1: every member sends each segment to its owner; owners reduce in member order.
  if (gsize > 1) {
    const size_t slot = (len + segs - 1) / segs;  // the largest segment
    p.new_round();
    size_t used = 0;
    std::vector<std::pair<int, size_t>> to_reduce;  // (segment, first slot)
    for (int s = 0; s < nseg; ++s) {
      int o = owner(mine, s);
      if (o != me) {
        p.send(g.ranks[o], seg_ref(s), seg_len(s));
        continue;
      }
      to_reduce.push_back({s, used});
      for (int m : mine)
        if (m != me) p.recv(g.ranks[m], {Buf::scratch, slot * used++}, seg_len(s));
    }
    p.need_scratch(slot * used);
    p.new_round();
    for (auto [s, first] : to_reduce)
      for (int k = 0; k < gsize - 1; ++k) p.reduce({Buf::scratch, slot * (first + k)}, seg_ref(s), seg_len(s));
  }
  // Phase 2: each owned segment is all-reduced among its owners, one per local group.
  for (int s = 0; s < nseg; ++s) {
    if (owner(mine, s) != me) continue;
    std::vector<int> owners;
    for (size_t k = 0; k < groups.size(); ++k) owners.push_back(owner(groups[k], s));
    all_reduce_rec(p, a, subset(g, owners, 1), off + block_begin(len, nseg, s), seg_len(s), forced);
  }
  // Phase 3: owners hand the reduced segments to the rest of their group.
  if (gsize > 1) {
    p.new_round();
    for (int s = 0; s < nseg; ++s) {
      int o = owner(mine, s);
      if (o != me) {
        p.recv(g.ranks[o], seg_ref(s), seg_len(s));
        continue;
      }
      for (int m : mine)
        if (m != me) p.send(g.ranks[m], seg_ref(s), seg_len(s));
    }
  }
}

// ---- broadcast: leaders first (recursively), then inside each local group ----

int leader(const Group& g, std::span<const int> grp, int root_real) {
  for (int m : grp)
    if (g.ranks[m] == root_real) return m;
  return grp.front();
}

void broadcast_rec(Plan& p, const CollArgs& a, Group g, int root_real, Ref in) {
  g = simplify(std::move(g));
  const Ref out{Buf::output, 0};
  if (g.level_of.empty())
    return flat(p, a, Collective::broadcast, g, a.count, index_in(g.ranks, root_real), in, out, {Buf::scratch, 0}, true);
  const Groups groups = local_groups(g);
  std::vector<int> leaders;
  for (size_t k = 0; k < groups.size(); ++k) leaders.push_back(leader(g, groups[k], root_real));
  const int me = index_in(g.ranks, a.rank);
  if (std::find(leaders.begin(), leaders.end(), me) != leaders.end()) broadcast_rec(p, a, subset(g, leaders, 1), root_real, in);
  for (size_t k = 0; k < groups.size(); ++k) {
    if (!contains(groups[k], me)) continue;
    Group local = subset(g, groups[k], g.level_of.size());
    flat(p, a, Collective::broadcast, local, a.count, index_in(local.ranks, g.ranks[leaders[k]]), out, out,
         {Buf::scratch, 0}, true);
  }
}

// ---- reduce: inside each local group to its leader, then among leaders (recursively) ----

void reduce_rec(Plan& p, const CollArgs& a, Group g, int root_real, Ref in, bool finalize) {
  g = simplify(std::move(g));
  const Ref out{Buf::output, 0};
  const size_t c = a.count;
  if (g.level_of.empty())
    return flat(p, a, Collective::reduce, g, c, index_in(g.ranks, root_real), in, out, {Buf::scratch, c}, finalize);
  const Groups groups = local_groups(g);
  std::vector<int> leaders;
  for (size_t k = 0; k < groups.size(); ++k) leaders.push_back(leader(g, groups[k], root_real));
  const int me = index_in(g.ranks, a.rank);
  // A leader that is not the root keeps its group's partial result in scratch[0, c).
  const Ref partial = a.rank == root_real ? out : Ref{Buf::scratch, 0};
  p.need_scratch(c);
  for (size_t k = 0; k < groups.size(); ++k) {
    if (!contains(groups[k], me)) continue;
    Group local = subset(g, groups[k], g.level_of.size());
    flat(p, a, Collective::reduce, local, c, index_in(local.ranks, g.ranks[leaders[k]]), in, partial,
         {Buf::scratch, c}, false);
  }
  if (std::find(leaders.begin(), leaders.end(), me) != leaders.end())
    reduce_rec(p, a, subset(g, leaders, 1), root_real, partial, finalize);
}

// ---- all_gather and reduce_scatter over two levels of equal, consecutive groups ----

// Groups of equal size g whose ranks are consecutive: returns g, or 0.
int even_consecutive(const CollArgs& a) {
  const Level& node = a.hier->levels[0];
  int g = static_cast<int>(a.hier->members(0, 0).size());
  if (g <= 1 || a.nranks % g != 0 || node.ngroups < 2) return 0;
  for (int r = 0; r < a.nranks; ++r)
    if (node.group[r] != node.group[(r / g) * g]) return 0;
  for (int k = 0; k < node.ngroups; ++k)
    if (node.group[k * g] == (k ? node.group[(k - 1) * g] : -1)) return 0;
  return g;
}

// Inter-group all-gather among ranks of equal local index (into scratch, K blocks), then
// every rank shares its K blocks with its group.
Plan all_gather_two_level(const CollArgs& a, int g) {
  Plan p;
  const int K = a.nranks / g, k = a.rank / g, l = a.rank % g;
  const size_t c = a.count;
  Group across;
  for (int j = 0; j < K; ++j) across.ranks.push_back(j * g + l);
  flat(p, a, Collective::all_gather, across, c, 0, {Buf::input, 0}, {Buf::scratch, 0}, {Buf::scratch, K * c}, true);
  p.need_scratch(K * c);
  p.new_round();
  for (int j = 0; j < K; ++j) p.copy({Buf::scratch, j * c}, {Buf::output, static_cast<size_t>(j * g + l) * c}, c);
  p.new_round();
  for (int m = 0; m < g; ++m) {
    if (m == l) continue;
    for (int j = 0; j < K; ++j) {
      p.send(k * g + m, {Buf::scratch, j * c}, c);
      p.recv(k * g + m, {Buf::output, static_cast<size_t>(j * g + m) * c}, c);
    }
  }
  return p;
}

// Inside the group, local rank l sums the blocks of every rank with local index l (K
// blocks) into scratch; then an inter-group reduce-scatter among ranks of index l.
Plan reduce_scatter_two_level(const CollArgs& a, int g) {
  Plan p;
  const int K = a.nranks / g, k = a.rank / g, l = a.rank % g;
  const size_t c = a.count, kc = static_cast<size_t>(K) * c;
  auto in_blk = [&](int node, int local) { return Ref{Buf::input, static_cast<size_t>(node * g + local) * c}; };
  const size_t slots = kc;  // scratch: [0, kc) accumulator, then (g-1) * kc received
  p.need_scratch(kc * static_cast<size_t>(g));
  p.new_round();
  for (int j = 0; j < K; ++j) p.copy(in_blk(j, l), {Buf::scratch, j * c}, c);
  size_t used = 0;
  for (int m = 0; m < g; ++m) {
    if (m == l) continue;
    for (int j = 0; j < K; ++j) {
      p.send(k * g + m, in_blk(j, m), c);
      p.recv(k * g + m, {Buf::scratch, slots + used * kc + j * c}, c);
    }
    ++used;
  }
  p.new_round();
  for (size_t u = 0; u < used; ++u) p.reduce({Buf::scratch, slots + u * kc}, {Buf::scratch, 0}, kc);
  Group across;
  for (int j = 0; j < K; ++j) across.ranks.push_back(j * g + l);
  flat(p, a, Collective::reduce_scatter, across, c, 0, {Buf::scratch, 0}, {Buf::output, 0}, {Buf::scratch, kc}, true);
  return p;
}

}  // namespace

// Every local group has the same size and there is one level: all ranks' plans then have
// the same rounds, which pipelining needs.
bool even_single_level(const CollArgs& a) {
  Group g = simplify(whole(a));
  if (g.level_of.size() != 1) return false;
  const std::vector<int> sizes = group_sizes(g);
  return std::all_of(sizes.begin(), sizes.end(), [&](int size) { return size == sizes[0]; });
}

// Large all-reduces run as pieces in a software pipeline, so that the network phase of one
// piece overlaps the shared-memory phases of the next.
Plan pipelined_all_reduce(const CollArgs& a) {
  const size_t bytes = a.count * a.elem_size;
  // Up to 16 pieces of at least 1 MiB: on the emulated 1gbit cluster both beat 8 pieces
  // and a 2 MiB floor (less of the first and last piece left unoverlapped;
  // docs/benchmarks.md, "Measured choices").
  const size_t pieces = std::min<size_t>(16, bytes / (1u << 20));
  std::vector<Plan> plans;
  std::vector<Placement> at;
  std::vector<int> all(static_cast<size_t>(a.nranks));
  for (int r = 0; r < a.nranks; ++r) all[static_cast<size_t>(r)] = r;
  size_t scratch = 0;
  for (size_t i = 0; i < pieces; ++i) {
    size_t off = block_begin(a.count, static_cast<int>(pieces), static_cast<int>(i));
    size_t len = block_size(a.count, static_cast<int>(pieces), static_cast<int>(i));
    CollArgs piece = a;
    piece.count = len;
    Plan p;
    p.new_round();
    p.copy({Buf::input, 0}, {Buf::output, 0}, len);
    all_reduce_rec(p, piece, whole(a), 0, len, Algo::ring);
    at.push_back({all, {Buf::input, off}, {Buf::output, off}, {Buf::scratch, scratch}, true});
    scratch += p.scratch_count;
    plans.push_back(std::move(p));
  }
  return interleave(plans, at);
}

bool hierarchy_splits(const CollArgs& a) { return a.hier && !simplify(whole(a)).level_of.empty(); }

bool hierarchical_is_ring(const CollArgs& a) {
  if (!hierarchy_splits(a)) return true;
  if (a.coll == Collective::all_gather || a.coll == Collective::reduce_scatter)
    return a.hier->levels.size() != 1 || even_consecutive(a) == 0;
  return !supports(Algo::hierarchical, a.coll);
}

namespace {

// The levels that shape a hierarchical plan (those simplify keeps), when each groups
// consecutive ranks into equal groups: ranks per group at each, innermost first; empty
// otherwise.
std::vector<int> regular_levels(const CollArgs& a) {
  std::vector<int> sizes;
  for (const Level& l : a.hier->levels) {
    if (l.ngroups <= 1) break;
    if (l.ngroups >= a.nranks) continue;
    if (a.nranks % l.ngroups) return {};
    const int size = a.nranks / l.ngroups;
    for (int r = 0; r < a.nranks; ++r)
      if (l.group[static_cast<size_t>(r)] != l.group[static_cast<size_t>(r / size * size)] ||
          (r % size == 0 && r > 0 && l.group[static_cast<size_t>(r)] == l.group[static_cast<size_t>(r - 1)]))
        return {};
    if (!sizes.empty() && size % sizes.back()) return {};
    sizes.push_back(size);
  }
  return sizes;
}

// Every segment a rank can own on its way up (each level's members cut the segment below
// into theirs) ends in a flat all_reduce among the K outermost groups' owners that moving
// every rank on by one group leaves the same: direct, or a ring of three or more over equal
// blocks.
bool segments_rotate(const CollArgs& a, const std::vector<int>& sizes, size_t level, size_t len, int K) {
  if (level == sizes.size()) {
    CollArgs top = a;
    top.count = len, top.nranks = K, top.hier = nullptr;
    const Algo flat = flat_choice(top);
    return flat == Algo::direct || (flat == Algo::ring && K >= 3 && len % static_cast<size_t>(K) == 0);
  }
  const int members = sizes[level] / (level ? sizes[level - 1] : 1);
  for (int s = 0; s < members; ++s)
    if (!segments_rotate(a, sizes, level + 1, block_size(len, members, s), K)) return false;
  return true;
}

}  // namespace

// Moving every rank on by one outermost group of regular levels maps each group to the next
// with every local index kept: the plans' exchanges inside groups go by local index, and
// only the flat part among the outermost groups' owners must be rotation symmetric itself.
// The pipelined all_reduce (one level, from 4 MiB): each piece's segments go to the member
// of their index, then a ring among the K owners of a segment (one per node, in node order:
// rotation symmetric when the segment splits into K equal blocks; three nodes at least, two
// cut pieces of their own), then back. all_gather and reduce_scatter over one level: the
// exchange among the ranks of equal local index is the ring or direct, the exchange inside
// the node by local index.
int hierarchical_rotation_period(const CollArgs& a) {
  if (hierarchical_is_ring(a)) return rotation_period(Algo::ring, a);
  const int g = a.hier->levels.size() == 1 ? even_consecutive(a) : 0;
  switch (a.coll) {
    case Collective::all_gather:
    case Collective::reduce_scatter: return g;
    case Collective::all_reduce: {
      if (a.count * a.elem_size >= (4u << 20) && even_single_level(a)) {  // pipelined
        const int K = g ? a.nranks / g : 0;
        if (K < 3) return 0;
        const int pieces = static_cast<int>(std::min<size_t>(16, a.count * a.elem_size / (1u << 20)));
        for (int i = 0; i < pieces; ++i)
          for (int s = 0; s < g; ++s)
            if (block_size(block_size(a.count, pieces, i), g, s) % static_cast<size_t>(K) != 0) return 0;
        return g;
      }
      const std::vector<int> sizes = regular_levels(a);
      if (sizes.empty()) return 0;
      return segments_rotate(a, sizes, 0, a.count, a.nranks / sizes.back()) ? sizes.back() : 0;
    }
    default: return 0;
  }
}

Plan hierarchical_plan(const CollArgs& a) {
  if (hierarchical_is_ring(a)) return ring_plan(a);
  Plan p;
  switch (a.coll) {
    case Collective::all_reduce:
      if (a.count * a.elem_size >= (4u << 20) && even_single_level(a)) {
        p = pipelined_all_reduce(a);
        break;
      }
      p.new_round();
      p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
      all_reduce_rec(p, a, whole(a), 0, a.count);
      break;
    case Collective::broadcast:
      p.new_round();
      if (a.rank == a.root) p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
      broadcast_rec(p, a, whole(a), a.root, {Buf::output, 0});
      break;
    case Collective::reduce: reduce_rec(p, a, whole(a), a.root, {Buf::input, 0}, true); break;
    case Collective::all_gather:
    case Collective::reduce_scatter: {
      const int g = even_consecutive(a);  // one level of equal consecutive nodes (hierarchical_is_ring)
      p = a.coll == Collective::all_gather ? all_gather_two_level(a, g) : reduce_scatter_two_level(a, g);
      break;
    }
    default: return ring_plan(a);
  }
  p.algo = name(Algo::hierarchical);
  return p;
}

}  // namespace strata
