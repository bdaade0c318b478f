// Recursive doubling all-reduce (latency-optimal for small vectors): log2(p) exchanges of
// the whole vector, p the largest power of two <= n. The first 2*(n-p) ranks pair up
// beforehand (even sends to odd) and the odd ones hand the result back at the end.
#include "algorithms/algorithms.hpp"

namespace strata {

Plan recursive_doubling_plan(const CollArgs& a) {
  Plan p;
  p.algo = "recursive_doubling";
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

}  // namespace strata
