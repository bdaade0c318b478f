#include "proof.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "strata/collective.hpp"

namespace strata::sim {

namespace {

// ---- arithmetic modulo the Mersenne prime 2^61 - 1 ----

constexpr uint64_t kP = (uint64_t{1} << 61) - 1;

uint64_t add(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;
  return s >= kP ? s - kP : s;
}
uint64_t mul(uint64_t a, uint64_t b) {
  const unsigned __int128 z = static_cast<unsigned __int128>(a) * b;
  const uint64_t s = (static_cast<uint64_t>(z) & kP) + static_cast<uint64_t>(z >> 61);
  return s >= kP ? s - kP : s;
}
uint64_t power(uint64_t g, int64_t e) {
  // g^(p-1) = 1: negative exponents wrap.
  uint64_t k = static_cast<uint64_t>(((e % static_cast<int64_t>(kP - 1)) + static_cast<int64_t>(kP - 1)) % static_cast<int64_t>(kP - 1));
  uint64_t r = 1;
  for (; k; k >>= 1, g = mul(g, g))
    if (k & 1) r = mul(r, g);
  return r;
}
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A multiset of contributions held by every element of a run: how many, and the sum of
// k_q * g^(i - x) over them (x: the element's position in its rank's memory).
struct Val {
  uint64_t n = 0, h = 0;
  bool operator==(const Val& o) const { return n == o.n && h == o.h; }
};
Val plus(Val a, Val b) { return {a.n + b.n, add(a.h, b.h)}; }

using Pieces = std::vector<std::pair<uint64_t, Val>>;  // (length, content), in order

// One rank's memory: runs of equal content, each reaching to the next one's start (a
// ring's rank holds a run per block, a thousand at 1,024 ranks: a map, not a vector).
class Memory {
 public:
  explicit Memory(uint64_t size) : size_(size) { runs_.emplace(0, Val{}); }

  void read(uint64_t lo, uint64_t n, Pieces& out) const {
    out.clear();
    auto it = std::prev(runs_.upper_bound(lo));
    for (uint64_t at = lo; at < lo + n; ++it) {
      const auto next = std::next(it);
      const uint64_t end = std::min(lo + n, next == runs_.end() ? size_ : next->first);
      out.push_back({end - at, it->second});
      at = end;
    }
  }
  // Writes `p` from `lo` on, each run's fingerprint multiplied by `factor` (a move).
  void write(uint64_t lo, const Pieces& p, uint64_t factor) {
    uint64_t n = 0;
    for (auto& [len, v] : p) n += len;
    split(lo + n);
    auto first = split(lo);
    runs_.erase(first, runs_.lower_bound(lo + n));
    uint64_t at = lo;
    auto hint = runs_.lower_bound(lo);
    const Val* last = nullptr;
    for (auto& [len, v] : p) {
      const Val moved{v.n, mul(v.h, factor)};
      if (!last || !(*last == moved)) last = &runs_.emplace_hint(hint, at, moved)->second;
      at += len;
    }
    // Runs equal to their neighbour across the written range's ends merge.
    merge(lo + n);
    merge(lo);
  }
  size_t runs() const { return runs_.size(); }

 private:
  // Makes a run start at x (x <= size); returns it (end() for x == size).
  std::map<uint64_t, Val>::iterator split(uint64_t x) {
    if (x >= size_) return runs_.end();
    auto it = std::prev(runs_.upper_bound(x));
    if (it->first == x) return it;
    return runs_.emplace_hint(std::next(it), x, it->second);
  }
  void merge(uint64_t x) {
    auto it = runs_.find(x);
    if (it != runs_.end() && it != runs_.begin() && std::prev(it)->second == it->second) runs_.erase(it);
  }

  uint64_t size_;
  std::map<uint64_t, Val> runs_;
};

// Adds two piece lists over the same range, element by element.
void combine(const Pieces& a, const Pieces& b, Pieces& out) {
  out.clear();
  size_t i = 0, j = 0;
  uint64_t ai = a.empty() ? 0 : a[0].first, bj = b.empty() ? 0 : b[0].first;  // left in the current pieces
  while (i < a.size() && j < b.size()) {
    const uint64_t len = std::min(ai, bj);
    out.push_back({len, plus(a[i].second, b[j].second)});
    ai -= len, bj -= len;
    if (ai == 0 && ++i < a.size()) ai = a[i].first;
    if (bj == 0 && ++j < b.size()) bj = b[j].first;
  }
}
void scale(Pieces& p, uint64_t factor) {
  for (auto& [len, v] : p) v.h = mul(v.h, factor);
}

// ---- the plans, with every reference resolved to a position in its rank's memory ----

struct Region {
  uint64_t base = 0, size = 0;
};
struct RankLayout {
  Region in, out, scratch;
  uint64_t size = 0;
};

RankLayout layout(const SimCall& call, int nranks, int rank, size_t scratch) {
  const Geometry g = geometry(call.coll, call.count, nranks, rank, call.root);
  RankLayout l;
  l.out = {0, g.recv_count};
  if (!call.in_place || g.in_place == InPlace::none) {
    l.in = {g.recv_count, g.send_count};
  } else if (g.in_place == InPlace::send_in_recv) {
    l.in = {g.in_place_offset, g.send_count};
  } else if (g.in_place == InPlace::recv_in_send) {
    l.in = {0, g.send_count};
    l.out = {g.in_place_offset, g.recv_count};
  } else {
    l.in = {0, g.send_count};
  }
  l.size = std::max({l.out.base + l.out.size, l.in.base + l.in.size});
  l.scratch = {l.size, scratch};
  l.size += scratch;
  return l;
}

struct PStep {
  uint64_t src, dst, count;
  uint32_t dir;  // transfers: index of (sender, receiver)
  StepKind kind;
};

struct Compiled {
  std::vector<PStep> steps;
  std::vector<uint64_t> round_first;  // every rank's rounds, then a sentinel
  std::vector<uint64_t> rank_first;   // each rank's first round, then a sentinel
  std::vector<RankLayout> layouts;
  std::vector<std::pair<int, int>> dirs;
  std::vector<int32_t> reverse;
  std::string failure;
};

const char* kind_name(StepKind k) {
  switch (k) {
    case StepKind::send: return "send";
    case StepKind::recv: return "recv";
    case StepKind::recv_reduce: return "recv_reduce";
    case StepKind::recv_reduce_send: return "recv_reduce_send";
    case StepKind::copy: return "copy";
    case StepKind::reduce: return "reduce";
    case StepKind::finalize: return "finalize";
  }
  return "?";
}

class Compiler {
 public:
  Compiler(const SimCall& call, int nranks) : call_(call), n_(nranks) {}

  // Adds rank r's plan; false (with c.failure set) when a step leaves its buffer.
  bool add(int r, const Plan& p) {
    c.rank_first.push_back(c.round_first.size());
    c.layouts.push_back(layout(call_, n_, r, p.scratch_count));
    const RankLayout& l = c.layouts.back();
    auto at = [&](Ref ref, uint64_t count, size_t step, uint64_t* pos) {
      const Region g = ref.buf == Buf::input ? l.in : ref.buf == Buf::output ? l.out : l.scratch;
      if (ref.buf == Buf::absolute || ref.offset + count > g.size) {
        c.failure = "rank " + std::to_string(r) + "'s step " + std::to_string(step) + " (" + kind_name(p.steps[step].kind) +
                    ") reaches past its buffer";
        return false;
      }
      *pos = g.base + ref.offset;
      return true;
    };
    for (size_t round = 0; round < p.rounds(); ++round) {
      c.round_first.push_back(c.steps.size());
      for (size_t i = p.round_begin[round]; i < p.round_end(round); ++i) {
        const Step& s = p.steps[i];
        PStep q{0, 0, s.count, 0, s.kind};
        if (s.kind != StepKind::recv && s.kind != StepKind::finalize && !at(s.src, s.count, i, &q.src)) return false;
        if (s.kind != StepKind::send && !at(s.dst, s.count, i, &q.dst)) return false;
        if (s.peer >= 0) {
          if (s.peer == r || s.peer >= n_) {
            c.failure = "rank " + std::to_string(r) + "'s step " + std::to_string(i) + " addresses rank " + std::to_string(s.peer);
            return false;
          }
          q.dir = s.kind == StepKind::send ? dir(r, s.peer) : dir(s.peer, r);
        }
        c.steps.push_back(q);
      }
    }
    return true;
  }
  Compiled finish() {
    c.rank_first.push_back(c.round_first.size());
    c.round_first.push_back(c.steps.size());
    c.reverse.assign(c.dirs.size(), -1);
    for (size_t d = 0; d < c.dirs.size(); ++d) {
      auto it = ids_.find(key(c.dirs[d].second, c.dirs[d].first));
      if (it != ids_.end()) c.reverse[d] = static_cast<int32_t>(it->second);
    }
    return std::move(c);
  }
  Compiled c;

 private:
  static uint64_t key(int from, int to) { return static_cast<uint64_t>(from) << 32 | static_cast<uint32_t>(to); }
  uint32_t dir(int from, int to) {
    auto [it, added] = ids_.emplace(key(from, to), static_cast<uint32_t>(c.dirs.size()));
    if (added) c.dirs.push_back({from, to});
    return it->second;
  }
  SimCall call_;
  int n_;
  std::unordered_map<uint64_t, uint32_t> ids_;
};

// ---- the replay ----

class Prover {
 public:
  Prover(const SimCall& call, Compiled plans, uint64_t seed) : call_(call), p_(std::move(plans)) {
    const int n = static_cast<int>(p_.layouts.size());
    uint64_t s = seed;
    g_ = 2 + splitmix(s) % (kP - 3);
    for (int q = 0; q < n; ++q) {
      keys_.push_back(1 + splitmix(s) % (kP - 1));
      total_ = add(total_, keys_.back());
    }
    ranks_.resize(static_cast<size_t>(n));
    dirs_.resize(p_.dirs.size());
    for (int q = 0; q < n; ++q) {
      const RankLayout& l = p_.layouts[static_cast<size_t>(q)];
      mem_.emplace_back(std::max<uint64_t>(l.size, 1));
      // Input element i of rank q holds (q, i): at position in.base + i, g^(i - x) = g^-in.base.
      if (l.in.size) mem_.back().write(l.in.base, {{l.in.size, {1, keys_[q]}}}, power(g_, -static_cast<int64_t>(l.in.base)));
      ranks_[static_cast<size_t>(q)].round = p_.rank_first[static_cast<size_t>(q)];
    }
  }

  ProofResult run();

 private:
  struct Send {
    Pieces data;
    uint64_t src, count;
    int32_t gate = -1;  // a forward: sent from the receiver's destination once this receive is done
  };
  struct Recv {
    uint64_t dst, local, count;
    bool reduce;
    int32_t gate = -1;  // this receive opens a forward
  };
  struct Dir {
    std::vector<Send> sends;
    std::vector<Recv> recvs;
    size_t send_head = 0, recv_head = 0;
  };
  struct Rank {
    uint64_t round;  // the next round to start
    int pending = 0;
  };

  bool start_round(int r);
  bool deliver(uint32_t d);
  bool fail(std::string why) {
    if (res_.failure.empty()) res_.failure = std::move(why);
    res_.ok = false;
    return false;
  }
  void check_outputs();

  SimCall call_;
  Compiled p_;
  uint64_t g_, total_ = 0;
  std::vector<uint64_t> keys_;
  std::vector<Memory> mem_;
  std::vector<Rank> ranks_;
  std::vector<Dir> dirs_;
  std::vector<bool> gates_;  // forwards' receives, done or not
  std::vector<int> ready_ranks_;
  std::vector<uint32_t> ready_dirs_;
  ProofResult res_;
  Pieces a_, b_, c_;
};

bool Prover::start_round(int r) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  const uint64_t first = p_.round_first[k.round], end = p_.round_first[k.round + 1];
  Memory& m = mem_[static_cast<size_t>(r)];
  std::vector<std::pair<uint64_t, uint64_t>> written, read;  // this round's transfers' ranges
  for (uint64_t i = first; i < end; ++i) {
    const PStep& s = p_.steps[i];
    switch (s.kind) {
      case StepKind::copy:
        m.read(s.src, s.count, a_);
        m.write(s.dst, a_, power(g_, static_cast<int64_t>(s.src) - static_cast<int64_t>(s.dst)));
        break;
      case StepKind::reduce:
        m.read(s.src, s.count, a_);
        scale(a_, power(g_, static_cast<int64_t>(s.src) - static_cast<int64_t>(s.dst)));
        m.read(s.dst, s.count, b_);
        combine(b_, a_, c_);
        m.write(s.dst, c_, 1);
        break;
      case StepKind::finalize: break;
      case StepKind::send: {
        Dir& d = dirs_[s.dir];
        d.sends.push_back({{}, s.src, s.count});
        m.read(s.src, s.count, d.sends.back().data);
        read.push_back({s.src, s.count});
        ++k.pending;
        ready_dirs_.push_back(s.dir);
        break;
      }
      case StepKind::recv:
      case StepKind::recv_reduce:
      case StepKind::recv_reduce_send: {
        Dir& d = dirs_[s.dir];
        int32_t gate = -1;
        if (s.kind == StepKind::recv_reduce_send) {
          // The send back goes in its stream now, after the sends posted before it.
          gate = static_cast<int32_t>(gates_.size());
          gates_.push_back(false);
          const int32_t back = p_.reverse[s.dir];
          if (back < 0) return fail("rank " + std::to_string(r) + " forwards to a rank it never sends to");
          dirs_[static_cast<size_t>(back)].sends.push_back({{}, s.dst, s.count, gate});
          ++k.pending;
          ready_dirs_.push_back(static_cast<uint32_t>(back));
        }
        if (s.kind != StepKind::recv && s.src != s.dst) {
          if (s.src < s.dst + s.count && s.dst < s.src + s.count)
            return fail("rank " + std::to_string(r) + "'s reducing receive has an operand overlapping its destination");
          read.push_back({s.src, s.count});
        }
        d.recvs.push_back({s.dst, s.src, s.count, s.kind != StepKind::recv, gate});
        written.push_back({s.dst, s.count});
        ++k.pending;
        ready_dirs_.push_back(s.dir);
        break;
      }
    }
  }
  // Within a round, received data must not land where another transfer reads or writes.
  std::sort(written.begin(), written.end());
  for (size_t i = 1; i < written.size(); ++i)
    if (written[i].first < written[i - 1].first + written[i - 1].second)
      return fail("rank " + std::to_string(r) + " receives twice into the same memory in one round");
  for (auto [lo, n] : read) {
    auto it = std::upper_bound(written.begin(), written.end(), std::make_pair(lo + n, uint64_t{0}));
    if (it != written.begin() && std::prev(it)->first + std::prev(it)->second > lo)
      return fail("rank " + std::to_string(r) + " receives into memory it sends from in the same round");
  }
  ++k.round;
  return true;
}

bool Prover::deliver(uint32_t di) {
  Dir& d = dirs_[di];
  while (d.send_head < d.sends.size() && d.recv_head < d.recvs.size()) {
    Send& s = d.sends[d.send_head];
    if (s.gate >= 0 && !gates_[static_cast<size_t>(s.gate)]) break;  // its receive is not done
    const Recv& r = d.recvs[d.recv_head];
    const auto [from, to] = p_.dirs[di];
    if (s.count != r.count)
      return fail("rank " + std::to_string(from) + " sends " + std::to_string(s.count) + " elements to rank " +
                  std::to_string(to) + ", which receives " + std::to_string(r.count) + " in that place");
    if (s.gate >= 0) mem_[static_cast<size_t>(from)].read(s.src, s.count, s.data);
    Memory& m = mem_[static_cast<size_t>(to)];
    scale(s.data, power(g_, static_cast<int64_t>(s.src) - static_cast<int64_t>(r.dst)));
    if (r.reduce) {
      m.read(r.local, r.count, a_);
      scale(a_, power(g_, static_cast<int64_t>(r.local) - static_cast<int64_t>(r.dst)));
      combine(a_, s.data, c_);
      m.write(r.dst, c_, 1);
    } else {
      m.write(r.dst, s.data, 1);
    }
    res_.runs_peak = std::max(res_.runs_peak, m.runs());
    if (r.gate >= 0) {
      gates_[static_cast<size_t>(r.gate)] = true;
      if (p_.reverse[di] >= 0) ready_dirs_.push_back(static_cast<uint32_t>(p_.reverse[di]));
    }
    Pieces().swap(s.data);
    ++d.send_head, ++d.recv_head;
    if (d.send_head == d.sends.size()) d.sends.clear(), d.send_head = 0;
    if (d.recv_head == d.recvs.size()) d.recvs.clear(), d.recv_head = 0;
    for (int q : {from, to})
      if (--ranks_[static_cast<size_t>(q)].pending == 0) ready_ranks_.push_back(q);
  }
  return true;
}

void Prover::check_outputs() {
  const int n = static_cast<int>(ranks_.size());
  Pieces got;
  for (int r = 0; r < n; ++r) {
    const RankLayout& l = p_.layouts[static_cast<size_t>(r)];
    if (!l.out.size) continue;  // a reduce's non-root, a barrier
    mem_[static_cast<size_t>(r)].read(l.out.base, l.out.size, got);
    const size_t c = call_.count;
    const int64_t out = static_cast<int64_t>(l.out.base);
    // The expected multiset of element i, as a fingerprint at its position out + i.
    auto want = [&](uint64_t i) -> Val {
      const int64_t b = static_cast<int64_t>(i / c);
      switch (call_.coll) {
        case Collective::all_reduce:
        case Collective::reduce: return {static_cast<uint64_t>(n), mul(total_, power(g_, -out))};
        case Collective::reduce_scatter:
          return {static_cast<uint64_t>(n), mul(total_, power(g_, static_cast<int64_t>(r) * static_cast<int64_t>(c) - out))};
        case Collective::all_gather: return {1, mul(keys_[static_cast<size_t>(b)], power(g_, -out - b * static_cast<int64_t>(c)))};
        case Collective::broadcast: return {1, mul(keys_[static_cast<size_t>(call_.root)], power(g_, -out))};
        case Collective::all_to_all:
          return {1, mul(keys_[static_cast<size_t>(b)], power(g_, (static_cast<int64_t>(r) - b) * static_cast<int64_t>(c) - out))};
        default: return {};
      }
    };
    uint64_t at = 0;
    for (auto& [len, v] : got) {
      // Expected contents change only at block boundaries: check each block the piece touches.
      for (uint64_t i = at; i < at + len; i = (i / c + 1) * c) {
        const Val w = want(i);
        if (!(v == w)) {
          ++res_.wrong_ranks;
          if (res_.failure.empty())
            res_.failure = "rank " + std::to_string(r) + "'s output element " + std::to_string(i) + " holds " +
                           (v.n == w.n ? "other contributions than" : std::to_string(v.n) + " contributions, not") +
                           " the expected " + std::to_string(w.n);
          res_.ok = false;
          at = l.out.size;  // one per rank
          break;
        }
      }
      if (at >= l.out.size) break;
      at += len;
    }
  }
}

ProofResult Prover::run() {
  const int n = static_cast<int>(ranks_.size());
  res_.steps = p_.steps.size();
  for (int r = n - 1; r >= 0; --r) ready_ranks_.push_back(r);
  while (!ready_ranks_.empty() || !ready_dirs_.empty()) {
    if (!ready_ranks_.empty()) {
      const int r = ready_ranks_.back();
      ready_ranks_.pop_back();
      Rank& k = ranks_[static_cast<size_t>(r)];
      while (k.pending == 0 && k.round < p_.rank_first[static_cast<size_t>(r) + 1])
        if (!start_round(r)) return res_;
      continue;
    }
    const uint32_t d = ready_dirs_.back();
    ready_dirs_.pop_back();
    if (!deliver(d)) return res_;
  }
  for (int r = 0; r < n; ++r) {
    const Rank& k = ranks_[static_cast<size_t>(r)];
    if (k.pending || k.round < p_.rank_first[static_cast<size_t>(r) + 1]) {
      fail("rank " + std::to_string(r) + " deadlocked in round " + std::to_string(k.round - p_.rank_first[static_cast<size_t>(r)]));
      return res_;
    }
  }
  for (size_t d = 0; d < dirs_.size(); ++d)
    if (dirs_[d].send_head < dirs_[d].sends.size()) {
      fail("unmatched send " + std::to_string(p_.dirs[d].first) + "->" + std::to_string(p_.dirs[d].second));
      return res_;
    }
  check_outputs();
  return res_;
}

ProofResult finish(const SimCall& call, Compiler& comp, uint64_t seed) {
  if (!comp.c.failure.empty()) {
    ProofResult r;
    r.ok = false;
    r.failure = comp.c.failure;
    return r;
  }
  return Prover(call, comp.finish(), seed).run();
}

}  // namespace

ProofResult prove(const Cluster& c, const Hierarchy& h, const SimCall& call, const PlanChoice& choice, uint64_t seed) {
  const int n = c.nranks();
  Compiler comp(call, n);
  for (int r = 0; r < n && comp.c.failure.empty(); ++r) {
    CollArgs a = choice.args;
    a.rank = r;
    comp.add(r, build_plan(choice.algo, a));
  }
  return finish(call, comp, seed);
}

ProofResult prove_plans(const ProofInput& in, uint64_t seed) {
  Compiler comp(in.call, in.nranks);
  for (int r = 0; r < in.nranks && comp.c.failure.empty(); ++r) comp.add(r, in.plans[static_cast<size_t>(r)]);
  return finish(in.call, comp, seed);
}

}  // namespace strata::sim
