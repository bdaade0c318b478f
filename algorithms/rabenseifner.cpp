// Rabenseifner's all-reduce: reduce-scatter by recursive halving, then all-gather by
// recursive doubling, among p = the largest power of two <= n ranks (the first 2(n-p)
// ranks fold in beforehand and get the result back at the end, as in recursive doubling).
// Bandwidth like the ring (2(p-1)/p of the vector per rank) in 2 log2(p) steps.
#include "algorithms/algorithms.hpp"

namespace strata {

Plan rabenseifner_plan(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::rabenseifner);
  const int n = a.nranks, r = a.rank;
  const Fold fold(n);
  const int pow2 = fold.pow2, me = fold.member(r);
  const size_t c = a.count;
  const Ref in{Buf::input, 0}, out{Buf::output, 0};
  // The input is never copied: the first reduction of each block reads it where it is and
  // writes the output; later steps work on the output.
  bool partial_in_out = false;
  p.new_round();
  if (n == 1) p.copy(in, out, c);
  if (fold.paired(r)) {
    if (me < 0) p.send(r + 1, in, c);
    else p.recv_reduce(r - 1, in, out, c), partial_in_out = true;
  }
  auto at = [&](int block) { return Ref{Buf::output, block_begin(c, pow2, block)}; };
  auto cur = [&](int block) { return partial_in_out ? at(block) : Ref{Buf::input, block_begin(c, pow2, block)}; };
  auto span = [&](int lo, int hi) { return block_begin(c, pow2, hi) - block_begin(c, pow2, lo); };
  if (me >= 0) {
    int lo = 0, hi = pow2;  // blocks this rank is still responsible for
    for (int mask = pow2 / 2; mask >= 1; mask /= 2) {
      int mid = (lo + hi) / 2, partner = fold.rank_of(me ^ mask);
      p.new_round();
      if (me & mask) {  // keep the upper half
        p.send(partner, cur(lo), span(lo, mid));
        p.recv_reduce(partner, cur(mid), at(mid), span(mid, hi));
        lo = mid;
      } else {
        p.send(partner, cur(mid), span(mid, hi));
        p.recv_reduce(partner, cur(lo), at(lo), span(lo, mid));
        hi = mid;
      }
      partial_in_out = true;
    }
    p.new_round();
    p.finalize(at(lo), span(lo, hi));  // block `me`, fully reduced
    for (int mask = 1; mask < pow2; mask *= 2) {
      int width = hi - lo, partner = fold.rank_of(me ^ mask);
      int plo = (me & mask) ? lo - width : hi;
      p.new_round();
      p.send(partner, at(lo), span(lo, hi));
      p.recv(partner, at(plo), span(plo, plo + width));
      lo = std::min(lo, plo);
      hi = lo + 2 * width;
    }
  }
  fold.hand_back(p, r, out, c);
  if (n == 1) p.finalize(out, c);
  return p;
}

}  // namespace strata
