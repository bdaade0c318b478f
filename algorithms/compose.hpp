// Composition of plans: a plan built for a sub-group of ranks (sub-rank i = real rank
// peers[i]) is appended round by round to a parent plan, its buffers placed inside the
// parent's. Hierarchical algorithms are such compositions.
#pragma once

#include <vector>

#include "plan.hpp"

namespace strata {

struct Placement {
  std::vector<int> peers;  // real rank of each sub-rank
  Ref input, output, scratch;  // where the sub-plan's buffers start in the parent's
  bool keep_finalize = true;   // false: an outer step finalizes later
};

inline void append(Plan& p, const Plan& sub, const Placement& at) {
  auto place = [&](Ref r) {
    Ref base = r.buf == Buf::input ? at.input : r.buf == Buf::output ? at.output : at.scratch;
    return Ref{base.buf, base.offset + r.offset};
  };
  for (size_t round = 0; round < sub.rounds(); ++round) {
    p.new_round();
    for (size_t i = sub.round_begin[round]; i < sub.round_end(round); ++i) {
      Step s = sub.steps[i];
      if (s.kind == StepKind::finalize && !at.keep_finalize) continue;
      if (s.peer >= 0) s.peer = at.peers[static_cast<size_t>(s.peer)];
      if (s.kind == StepKind::send || s.kind == StepKind::copy || s.kind == StepKind::reduce) s.src = place(s.src);
      if (s.kind != StepKind::send) s.dst = place(s.dst);
      switch (s.kind) {
        case StepKind::send: p.send(s.peer, s.src, s.count); break;
        case StepKind::recv: p.recv(s.peer, s.dst, s.count); break;
        case StepKind::recv_reduce: p.recv_reduce(s.peer, s.dst, s.count); break;
        case StepKind::copy: p.copy(s.src, s.dst, s.count); break;
        case StepKind::reduce: p.reduce(s.src, s.dst, s.count); break;
        case StepKind::finalize: p.finalize(s.dst, s.count); break;
      }
    }
  }
  if (at.scratch.buf == Buf::scratch) p.need_scratch(at.scratch.offset + sub.scratch_count);
}

}  // namespace strata
