// Binomial trees (latency-optimal: log2(n) steps) for broadcast and reduce.
#include "algorithms/algorithms.hpp"

namespace strata {

namespace {

int real_rank(int vr, const CollArgs& a) { return mod(vr + a.root, a.nranks); }

Plan broadcast(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::tree);
  const int n = a.nranks, vr = mod(a.rank - a.root, n);
  p.new_round();
  if (vr == 0) p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      p.recv(real_rank(vr - mask, a), {Buf::output, 0}, a.count);
      break;
    }
    mask <<= 1;
  }
  p.new_round();
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) p.send(real_rank(vr + mask, a), {Buf::output, 0}, a.count);
  return p;
}

// Children's partial results are reduced one per round, in a fixed order, so the result
// does not depend on which child happens to arrive first.
Plan reduce(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::tree);
  const int n = a.nranks, vr = mod(a.rank - a.root, n);
  const Buf acc = vr == 0 ? Buf::output : Buf::scratch;
  if (vr != 0) p.need_scratch(a.count);
  p.new_round();
  p.copy({Buf::input, 0}, {acc, 0}, a.count);
  for (int mask = 1; mask < n; mask <<= 1) {
    p.new_round();
    if (vr & mask) {
      p.send(real_rank(vr - mask, a), {acc, 0}, a.count);
      break;
    }
    if (vr + mask < n) p.recv_reduce(real_rank(vr + mask, a), {acc, 0}, a.count);
  }
  if (vr == 0) {
    p.new_round();
    p.finalize({Buf::output, 0}, a.count);
  }
  return p;
}

}  // namespace

Plan tree_plan(const CollArgs& a) {
  return a.coll == Collective::broadcast ? broadcast(a) : reduce(a);
}

}  // namespace strata
