// The one choice of a plan for a call: the algorithm (the tuner's, or the one STRATA_ALGO
// forces where it applies) and the arguments its builder is given (the chain's chunk).
// The communicator (CommState::build_plan_for) and strata-sim (perf/sim/plan_set.cpp)
// both call choose_plan, so the simulator replays the plan the library would run; what
// each passes in is listed in docs/simulator.md ("What the tuner is told").
#pragma once

#include <string>

#include "algorithms/tuner.hpp"

namespace strata {

// The settings that shape plans, as a communicator reads them (ground/settings.cpp).
struct PlanSettings {
  std::string algo;              // STRATA_ALGO: an algorithm's name; empty: the tuner
  size_t chunk_bytes = 0;        // STRATA_CHUNK_BYTES (its default when unset)
  bool chunk_bytes_set = false;  // set: it overrides the tuner's chain chunk
};

struct PlanChoice {
  Algo algo = Algo::ring;
  // How it was chosen, for logs: "tuner", "STRATA_ALGO", "STRATA_ALGO does not apply; tuner".
  const char* why = "tuner";
  bool forced = false;     // STRATA_ALGO chose it
  double predicted_s = 0;  // the tuner's prediction for `algo`
  CollArgs args;           // what build_plan(algo, ...) is given: the call's, chunk set
};

// `a`: the call as every rank sees it (its chunk_count is replaced by the settings' or
// the tuner's chunk). The choice does not depend on a.rank: every rank makes the same.
PlanChoice choose_plan(CollArgs a, const PlanSettings& s);

}  // namespace strata
