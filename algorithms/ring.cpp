// Ring algorithms (bandwidth-optimal): each rank talks to its two neighbours only.
// Broadcast and reduce use the ring as a pipelined chain from/to the root.
#include "algorithms/algorithms.hpp"
#include "algorithms/compose.hpp"

namespace strata {

namespace {

// Ring reduce-scatter then all-gather into the output buffer. The input is never copied:
// the first send reads it, and every receive reduces the input's block with the incoming
// one straight into the output (each block is received-and-reduced once per rank).
Plan all_reduce_whole(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  auto in = [&](int i) { return Ref{Buf::input, block_begin(a.count, n, mod(i, n))}; };
  auto blk = [&](int i) { return Ref{Buf::output, block_begin(a.count, n, mod(i, n))}; };
  auto len = [&](int i) { return block_size(a.count, n, mod(i, n)); };
  p.new_round();
  if (n == 1) p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
  for (int s = 0; s < n - 1; ++s) {
    if (s) p.new_round();
    p.send(next, s == 0 ? in(r) : blk(r - s), len(r - s));
    p.recv_reduce(prev, in(r - s - 1), blk(r - s - 1), len(r - s - 1));
  }
  // This rank now owns the reduced block r+1.
  for (int s = 0; s < n - 1; ++s) {
    p.new_round();
    if (s == 0) p.finalize(blk(r + 1), len(r + 1));
    p.send(next, blk(r + 1 - s), len(r + 1 - s));
    p.recv(prev, blk(r - s), len(r - s));
  }
  if (n == 1) p.finalize(blk(0), a.count);
  return p;
}

// Two ranks, large vectors: the ring runs as 1 MiB pieces in a software pipeline (piece
// i's all-gather in the round of piece i+1's reduce-scatter), so each block a rank has just
// reduced is still in cache when it sends it back: faster out of place at 4-64 MiB
// (docs/benchmarks.md, "Measured choices"); more ranks keep one piece (not measured to
// help: their per-step transfers would shrink to 1/n MiB).
constexpr size_t kPieceBytes = 1 << 20;

// Not on device memory: there a round costs a kernel launch and a hand-off between
// processes, not a cache miss. On an H200 (ranks sharing it) the pieced 2-rank ring of
// 1 GiB, in 1025 rounds, ran far below the 4-rank ring's 6 rounds (docs/gpu.md, "Results";
// docs/benchmarks.md, "Measured choices").
int two_rank_pieces(const CollArgs& a) {
  if (a.memory == MemoryKind::device) return 1;
  const size_t bytes = a.count * a.elem_size;
  return bytes < 4 * kPieceBytes ? 1 : static_cast<int>(std::min<size_t>(bytes / kPieceBytes, a.count));
}

// Two ranks, out of place, over a link that forwards: per piece a rank sends its own half,
// reduces the peer's half from the input and the peer's into the output while forwarding
// each reduced bit back at once (from cache; nothing reads the output again), then
// receives its own half reduced. One round: the link streams the pieces. Each direction
// carries half 0, half 1, forward 0, half 2, forward 1, ...: a half runs one piece ahead,
// so the peer has the next piece's half while it forwards this one. (In place a piece's
// last receive would overwrite memory its first send reads; the pipelined plan below
// serves that case.)
// In place is a rank's own choice, so the peer may run the pipelined plan against this
// one: both put the same bytes on the wire in the same order (the ring's halves: each
// rank sends block r and reduces the other; pieces interleaved newest first).
Plan all_reduce_forwarding(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int r = a.rank, peer = 1 - r, pieces = two_rank_pieces(a);
  auto at = [&](int piece, Buf b, int half) {
    const size_t off = block_begin(a.count, pieces, piece), c = block_size(a.count, pieces, piece);
    return Ref{b, off + block_begin(c, 2, half)};
  };
  auto len = [&](int piece, int half) { return block_size(block_size(a.count, pieces, piece), 2, half); };
  p.new_round();
  p.send(peer, at(0, Buf::input, r), len(0, r));
  for (int i = 0; i < pieces; ++i) {
    if (i + 1 < pieces) p.send(peer, at(i + 1, Buf::input, r), len(i + 1, r));
    p.recv_reduce_send(peer, at(i, Buf::input, peer), at(i, Buf::output, peer), len(i, peer));
    if (i > 0) p.recv(peer, at(i - 1, Buf::output, r), len(i - 1, r));
  }
  p.recv(peer, at(pieces - 1, Buf::output, r), len(pieces - 1, r));
  return p;
}

Plan all_reduce(const CollArgs& a) {
  if (a.nranks == 2 && a.forward && !a.in_place) return all_reduce_forwarding(a);
  const int pieces = two_rank_pieces(a);
  if (a.nranks != 2 || pieces == 1) return all_reduce_whole(a);
  std::vector<Plan> plans;
  std::vector<Placement> at;
  for (int i = 0; i < pieces; ++i) {
    CollArgs piece = a;
    piece.count = block_size(a.count, pieces, i);
    size_t off = block_begin(a.count, pieces, i);
    plans.push_back(all_reduce_whole(piece));
    at.push_back({{0, 1}, {Buf::input, off}, {Buf::output, off}, {Buf::scratch, 0}, true});
  }
  Plan p = interleave(plans, at, /*newest_first=*/true);  // the forwarding plan's order
  p.algo = name(Algo::ring);
  return p;
}

// Block b travels the ring accumulating; it ends fully reduced on rank b. Two scratch
// accumulators alternate: one is sent while the other receives.
Plan reduce_scatter(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t c = a.count;
  auto in = [&](int b) { return Ref{Buf::input, static_cast<size_t>(mod(b, n)) * c}; };
  auto acc = [&](int s) { return Ref{Buf::scratch, static_cast<size_t>(s % 2) * c}; };
  p.need_scratch(2 * c);
  p.new_round();
  if (n == 1) {
    p.copy(in(0), {Buf::output, 0}, c);
    p.finalize({Buf::output, 0}, c);
    return p;
  }
  for (int s = 0; s < n - 1; ++s) {
    if (s) p.new_round();
    bool last = s == n - 2;
    Ref into = last ? Ref{Buf::output, 0} : acc(s);
    p.send(next, s == 0 ? in(r - 1) : acc(s - 1), c);
    p.recv_reduce(prev, in(r - s - 2), into, c);
  }
  p.new_round();
  p.finalize({Buf::output, 0}, c);
  return p;
}

Plan all_gather(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const size_t c = a.count;
  auto slot = [&](int b) { return Ref{Buf::output, static_cast<size_t>(mod(b, n)) * c}; };
  p.new_round();
  p.copy({Buf::input, 0}, slot(r), c);
  for (int s = 0; s < n - 1; ++s) {
    if (s) p.new_round();
    p.send(next, slot(r - s), c);
    p.recv(prev, slot(r - s - 1), c);
  }
  return p;
}

// Chain from the root: position i (distance from the root along the ring) receives chunk
// k in round k+i-1 and forwards it in round k+i.
Plan broadcast(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int n = a.nranks, pos = mod(a.rank - a.root, n);
  const int next = mod(a.rank + 1, n), prev = mod(a.rank - 1, n);
  const size_t chunk = std::max<size_t>(a.chunk_count, 1);
  const size_t nchunks = (a.count + chunk - 1) / chunk;
  auto at = [&](size_t k) { return Ref{Buf::output, k * chunk}; };
  auto len = [&](size_t k) { return std::min(chunk, a.count - k * chunk); };
  p.new_round();
  if (pos == 0) p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
  if (n == 1) return p;
  size_t rounds = nchunks + static_cast<size_t>(n) - 2;
  for (size_t t = 0; t < rounds; ++t) {
    if (t) p.new_round();
    // receive chunk t-pos+1, send chunk t-pos
    if (pos > 0 && t + 1 >= static_cast<size_t>(pos) && t + 1 - pos < nchunks) p.recv(prev, at(t + 1 - pos), len(t + 1 - pos));
    if (pos < n - 1 && t >= static_cast<size_t>(pos) && t - pos < nchunks) p.send(next, at(t - pos), len(t - pos));
  }
  return p;
}

// Chain towards the root: data flows from the rank before the root (position n-1) down the
// positions to the root; d is the distance from that tail. Position d receives chunk k in round
// k+d-1 (reducing into its accumulator) and forwards it in round k+d.
Plan reduce(const CollArgs& a) {
  Plan p;
  p.algo = name(Algo::ring);
  const int n = a.nranks, pos = mod(a.rank - a.root, n);
  const int d = n - 1 - pos;  // the root is the chain's head, distance n-1 from its tail
  const int to = mod(a.rank - 1, n), from = mod(a.rank + 1, n);
  const bool root = pos == 0;
  // Each received chunk is reduced with the input's chunk into the accumulator (the root's
  // output); the tail sends its input as it is. Nothing is copied first.
  const Buf accb = root ? Buf::output : Buf::scratch;
  if (!root && d > 0) p.need_scratch(a.count);
  const size_t chunk = std::max<size_t>(a.chunk_count, 1);
  const size_t nchunks = (a.count + chunk - 1) / chunk;
  auto at = [&](size_t k) { return Ref{accb, k * chunk}; };
  auto in = [&](size_t k) { return Ref{Buf::input, k * chunk}; };
  auto len = [&](size_t k) { return std::min(chunk, a.count - k * chunk); };
  p.new_round();
  if (n == 1) p.copy({Buf::input, 0}, {Buf::output, 0}, a.count);
  size_t rounds = nchunks + static_cast<size_t>(n) - 2;
  for (size_t t = 0; n > 1 && t < rounds; ++t) {
    if (t) p.new_round();
    if (d > 0 && t + 1 >= static_cast<size_t>(d) && t + 1 - d < nchunks) {
      size_t k = t + 1 - d;
      p.recv_reduce(from, in(k), at(k), len(k));
    }
    if (!root && t >= static_cast<size_t>(d) && t - d < nchunks) p.send(to, d == 0 ? in(t - d) : at(t - d), len(t - d));
  }
  if (root) {
    p.new_round();
    p.finalize({Buf::output, 0}, a.count);
  }
  return p;
}

}  // namespace

Plan ring_plan(const CollArgs& a) {
  switch (a.coll) {
    case Collective::all_reduce: return all_reduce(a);
    case Collective::reduce_scatter: return reduce_scatter(a);
    case Collective::all_gather: return all_gather(a);
    case Collective::broadcast: return broadcast(a);
    case Collective::reduce: return reduce(a);
    default: return {};
  }
}

}  // namespace strata
