// Recursive doubling all-reduce (latency-optimal for small vectors): log2(p) exchanges of
// the whole vector, p the largest power of two <= n. The first 2*(n-p) ranks pair up
// beforehand (even sends to odd) and the odd ones hand the result back at the end.
#include "algorithms/algorithms.hpp"

namespace strata {

Plan recursive_doubling_plan(const CollArgs& a) {
  Plan p;
  p.algo = "recursive_doubling";
  const int n = a.nranks, r = a.rank;
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int rem = n - pow2;
  const Ref out{Buf::output, 0}, tmp{Buf::scratch, 0};
  const size_t c = a.count;
  p.need_scratch(c);
  p.new_round();
  p.copy({Buf::input, 0}, out, c);

  int newrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      p.send(r + 1, out, c);
      newrank = -1;
    } else {
      p.recv_reduce(r - 1, out, c);
      newrank = r / 2;
    }
  } else {
    newrank = r - rem;
  }
  if (newrank >= 0) {
    for (int mask = 1; mask < pow2; mask <<= 1) {
      int pn = newrank ^ mask;
      int partner = pn < rem ? pn * 2 + 1 : pn + rem;
      p.new_round();
      p.send(partner, out, c);
      p.recv(partner, tmp, c);
      p.new_round();
      p.reduce(tmp, out, c);
    }
  }
  if (r < 2 * rem) {
    p.new_round();
    if (r % 2 == 0) p.recv(r + 1, out, c);
    else p.send(r - 1, out, c);
  }
  p.new_round();
  p.finalize(out, c);
  return p;
}

}  // namespace strata
