// Composition of plans: a plan built for a sub-group of ranks (sub-rank i = real rank
// peers[i]) is appended round by round to a parent plan, its buffers placed inside the
// parent's. Hierarchical algorithms are such compositions.
#pragma once

#include <algorithm>
#include <vector>

#include "ground/plan.hpp"

namespace strata {

struct Placement {
  std::vector<int> peers;  // real rank of each sub-rank
  Ref input, output, scratch;  // where the sub-plan's buffers start in the parent's
  bool keep_finalize = true;   // false: an outer step finalizes later
};

// Adds round `round` of `sub` to the parent's current round.
inline void append_round(Plan& p, const Plan& sub, size_t round, const Placement& at) {
  auto place = [&](Ref r) {
    Ref base = r.buf == Buf::input ? at.input : r.buf == Buf::output ? at.output : at.scratch;
    return Ref{base.buf, base.offset + r.offset};
  };
  for (size_t i = sub.round_begin[round]; i < sub.round_end(round); ++i) {
    Step s = sub.steps[i];
    if (s.kind == StepKind::finalize && !at.keep_finalize) continue;
    if (s.peer >= 0) s.peer = at.peers[static_cast<size_t>(s.peer)];
    if (s.kind != StepKind::recv && s.kind != StepKind::finalize) s.src = place(s.src);
    if (s.kind != StepKind::send) s.dst = place(s.dst);
    switch (s.kind) {
      case StepKind::send: p.send(s.peer, s.src, s.count); break;
      case StepKind::recv: p.recv(s.peer, s.dst, s.count); break;
      case StepKind::recv_reduce: p.recv_reduce(s.peer, s.src, s.dst, s.count); break;
      case StepKind::recv_reduce_send: p.recv_reduce_send(s.peer, s.src, s.dst, s.count); break;
      case StepKind::copy: p.copy(s.src, s.dst, s.count); break;
      case StepKind::reduce: p.reduce(s.src, s.dst, s.count); break;
      case StepKind::finalize: p.finalize(s.dst, s.count); break;
    }
  }
  if (at.scratch.buf == Buf::scratch) p.need_scratch(at.scratch.offset + sub.scratch_count);
}

inline void append(Plan& p, const Plan& sub, const Placement& at) {
  for (size_t round = 0; round < sub.rounds(); ++round) {
    p.new_round();
    append_round(p, sub, round, at);
  }
  if (at.scratch.buf == Buf::scratch) p.need_scratch(at.scratch.offset + sub.scratch_count);
}

// Software pipelining: piece i's round r runs in merged round r + i, so one piece's
// network phase overlaps the next piece's local phase. Valid only when every rank's piece
// plans have the same round structure, so that transfers between two ranks are posted in
// the same merged round, in the same piece order, on both sides. `newest_first`: within a
// merged round the later piece's steps come first (the order another plan on the same
// wire expects; see ring.cpp).
inline Plan interleave(const std::vector<Plan>& pieces, const std::vector<Placement>& at, bool newest_first = false) {
  Plan p;
  size_t rounds = 0;
  for (size_t i = 0; i < pieces.size(); ++i) rounds = std::max(rounds, pieces[i].rounds() + i);
  for (size_t t = 0; t < rounds; ++t) {
    p.new_round();
    const size_t last = std::min(t, pieces.size() - 1);
    for (size_t k = 0; k <= last; ++k) {
      const size_t i = newest_first ? last - k : k;
      if (t - i < pieces[i].rounds()) append_round(p, pieces[i], t - i, at[i]);
    }
  }
  for (size_t i = 0; i < pieces.size(); ++i)
    if (at[i].scratch.buf == Buf::scratch) p.need_scratch(at[i].scratch.offset + pieces[i].scratch_count);
  return p;
}

}  // namespace strata
