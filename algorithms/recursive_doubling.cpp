// Doubling-distance algorithms, latency-optimal for small vectors.
//
// All-reduce: log2(p) exchanges of the whole vector, p the largest power of two <= n. The
// first 2*(n-p) ranks pair up beforehand (even sends to odd) and the odd ones hand the
// result back at the end.
//
// All-gather (Bruck's): ceil(log2 n) rounds for any n. In the round of distance d a rank
// sends the blocks it holds so far to rank - d and appends those of rank + d, so scratch
// block j holds rank + j's block; a last local pass rotates them into place.
#include <algorithm>

#include "algorithms/algorithms.hpp"

namespace strata {

namespace {

Plan all_gather(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  auto held = [&](int j) { return Ref{Buf::scratch, static_cast<size_t>(j) * c}; };
  auto out = [&](int rank) { return Ref{Buf::output, static_cast<size_t>(rank) * c}; };
  p.need_scratch(static_cast<size_t>(n) * c);
  p.new_round();
  p.copy({Buf::input, 0}, held(0), c);
  for (int d = 1; d < n; d <<= 1) {
    const size_t blocks = static_cast<size_t>(std::min(d, n - d));
    p.new_round();
    p.send(mod(r - d, n), held(0), blocks * c);
    p.recv(mod(r + d, n), held(d), blocks * c);
  }
  p.new_round();
  p.copy(held(0), out(r), static_cast<size_t>(n - r) * c);
  if (r > 0) p.copy(held(n - r), out(0), static_cast<size_t>(r) * c);
  return p;
}

Plan all_reduce(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const Fold fold(n);
  const Ref out{Buf::output, 0}, tmp{Buf::scratch, 0};
  const size_t c = a.count;
  p.need_scratch(c);
  p.new_round();
  p.copy({Buf::input, 0}, out, c);

  const int me = fold.member(r);
  if (fold.paired(r)) {
    if (me < 0) p.send(r + 1, out, c);
    else p.recv_reduce(r - 1, out, c);
  }
  if (me >= 0) {
    for (int mask = 1; mask < fold.pow2; mask <<= 1) {
      int partner = fold.rank_of(me ^ mask);
      p.new_round();
      p.send(partner, out, c);
      p.recv(partner, tmp, c);
      p.new_round();
      p.reduce(tmp, out, c);
    }
  }
  fold.hand_back(p, r, out, c);
  p.new_round();
  p.finalize(out, c);
  return p;
}

}  // namespace

Plan recursive_doubling_plan(const CollArgs& a) {
  Plan p = a.coll == Collective::all_gather ? all_gather(a) : all_reduce(a);
  p.algo = name(Algo::recursive_doubling);
  return p;
}

}  // namespace strata
