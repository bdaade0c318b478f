// Direct algorithms: every rank exchanges with every other rank in a single round.
// Best for small messages and few ranks; reductions happen locally in rank order, so
// every rank computes bit-identical results.
#include "algorithms/algorithms.hpp"

namespace strata {

namespace {

// Reduces `n` scratch slots of `c` elements (slot j holds rank j's contribution) into dst.
void reduce_slots(Plan& p, int n, size_t c, Ref dst) {
  p.new_round();
  p.copy({Buf::scratch, 0}, dst, c);
  for (int j = 1; j < n; ++j) p.reduce({Buf::scratch, static_cast<size_t>(j) * c}, dst, c);
  p.finalize(dst, c);
}

// Own contribution is copied to scratch first: the output may alias the input.
Plan all_reduce(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  auto slot = [&](int j) { return Ref{Buf::scratch, static_cast<size_t>(j) * c}; };
  p.need_scratch(static_cast<size_t>(n) * c);
  p.new_round();
  p.copy({Buf::input, 0}, slot(r), c);
  for (int k = 1; k < n; ++k) {
    p.send(mod(r + k, n), {Buf::input, 0}, c);
    p.recv(mod(r - k, n), slot(mod(r - k, n)), c);
  }
  reduce_slots(p, n, c, {Buf::output, 0});
  return p;
}

Plan reduce_scatter(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  auto slot = [&](int j) { return Ref{Buf::scratch, static_cast<size_t>(j) * c}; };
  auto in = [&](int j) { return Ref{Buf::input, static_cast<size_t>(j) * c}; };
  p.need_scratch(static_cast<size_t>(n) * c);
  p.new_round();
  p.copy(in(r), slot(r), c);
  for (int k = 1; k < n; ++k) {
    p.send(mod(r + k, n), in(mod(r + k, n)), c);
    p.recv(mod(r - k, n), slot(mod(r - k, n)), c);
  }
  reduce_slots(p, n, c, {Buf::output, 0});
  return p;
}

Plan all_gather(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  p.new_round();
  p.copy({Buf::input, 0}, {Buf::output, static_cast<size_t>(r) * c}, c);
  for (int k = 1; k < n; ++k) {
    p.send(mod(r + k, n), {Buf::input, 0}, c);
    p.recv(mod(r - k, n), {Buf::output, static_cast<size_t>(mod(r - k, n)) * c}, c);
  }
  return p;
}

Plan all_to_all(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count, all = static_cast<size_t>(n) * c;
  // In place, the blocks to send are saved before received ones overwrite them.
  const Buf src = a.in_place ? Buf::scratch : Buf::input;
  p.new_round();
  if (a.in_place) {
    p.need_scratch(all);
    p.copy({Buf::input, 0}, {Buf::scratch, 0}, all);
  }
  auto blk = [&](Buf b, int j) { return Ref{b, static_cast<size_t>(j) * c}; };
  p.copy(blk(src, r), blk(Buf::output, r), c);
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n), from = mod(r - k, n);
    p.send(to, blk(src, to), c);
    p.recv(from, blk(Buf::output, from), c);
  }
  return p;
}

// Dissemination barrier: in round k every rank signals rank+2^k and waits for rank-2^k.
Plan barrier(const CollArgs& a) {
  Plan p;
  const int n = a.nranks, r = a.rank;
  p.need_scratch(2);
  for (int dist = 1; dist < n; dist <<= 1) {
    p.new_round();
    p.send(mod(r + dist, n), {Buf::scratch, 0}, 1);
    p.recv(mod(r - dist, n), {Buf::scratch, 1}, 1);
  }
  return p;
}

}  // namespace

Plan direct_plan(const CollArgs& a) {
  Plan p;
  switch (a.coll) {
    case Collective::all_reduce: p = all_reduce(a); break;
    case Collective::reduce_scatter: p = reduce_scatter(a); break;
    case Collective::all_gather: p = all_gather(a); break;
    case Collective::all_to_all: p = all_to_all(a); break;
    case Collective::barrier: p = barrier(a); break;
    default: break;
  }
  p.algo = name(Algo::direct);
  return p;
}

}  // namespace strata
