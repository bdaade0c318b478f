#include "algorithms/choice.hpp"

#include <algorithm>

namespace strata {

PlanChoice choose_plan(CollArgs a, const PlanSettings& s) {
  a.chunk_count = std::max<size_t>(1, s.chunk_bytes / a.elem_size);
  const Choice tuned = tune(a);
  PlanChoice c;
  c.algo = tuned.algo;
  if (!s.algo.empty()) {
    c.why = "STRATA_ALGO does not apply; tuner";
    for (Algo forced : kAllAlgos)
      if (s.algo == name(forced) && supports(forced, a.coll)) c.algo = forced, c.why = "STRATA_ALGO", c.forced = true;
  }
  // The tuner's chain chunk (broadcast and reduce along the ring), unless the user set one.
  if (tuned.chunk_bytes && !s.chunk_bytes_set) a.chunk_count = std::max<size_t>(1, tuned.chunk_bytes / a.elem_size);
  c.predicted_s = c.forced ? predict(c.algo, a) : tuned.predicted_s;
  c.args = a;
  return c;
}

}  // namespace strata
