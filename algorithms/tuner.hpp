// The tuner: an alpha-beta cost model per hierarchy level predicts each algorithm's time
// for one call; the cheapest applicable one is chosen.
#pragma once

#include "algorithms/algorithms.hpp"

namespace strata {

struct Choice {
  Algo algo;
  double predicted_s;
  size_t chunk_bytes;  // pipelining chunk for chain algorithms (0: not used)
};

// The link that a flat algorithm over all ranks of `h` must cross: the slowest level
// that still separates them.
LinkModel cross_link(const Hierarchy& h);

// Predicted seconds for `algo` on this call (a.hier may be null: one host, default model).
double predict(Algo algo, const CollArgs& a);
// The best applicable algorithm, and the chain chunk that minimises its time.
Choice tune(const CollArgs& a);

}  // namespace strata
