// The engine, modelled: every rank runs its plan round by round, as src/core/engine.cpp
// does. A round's local steps take their time first; then all its transfers are posted
// and the round ends when every one of them has completed. Transfers between two ranks
// pair up in posting order, per direction, as the links pair them; a direction carries
// one message at a time, in that order (a tcp stream, a FIFO). A message starts when it
// is first in line and, beyond the cluster's eager size, its receive has been posted; it
// flows through the network model (fair shares of every link on its path) and arrives a
// latency after its last byte left. A send completes when its last byte has left, a
// receive when its message has arrived. The send half of recv_reduce_send waits for its
// receive to complete. Several calls run back to back, as strata-perf times them.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fabric.hpp"
#include "plan_set.hpp"

namespace strata::sim {

// Plans that cannot run: a send and its receive of different sizes, a rank left waiting.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReplayOptions {
  int warmup = 0;  // calls before the timed ones, then a barrier
  int iters = 1;   // timed calls, back to back
};

// One level's links over the timed and untimed calls.
struct LevelUse {
  std::string name;
  size_t links = 0;          // each direction counted
  double bytes_max = 0;      // per call, on the busiest link
  double bytes_mean = 0;     // per call, over the links that carried anything
  size_t links_used = 0;
  double peak_Bps = 0;       // the busiest moment of the busiest link: total rate of its flows
  double peak_capacity_Bps = 0;
  double peak_time_s = 0;    // from the start of the first call
  int peak_flows = 0;
};

struct ReplayResult {
  double time_s = 0;     // per call, averaged over ranks (strata-perf -a 1)
  double slowest_s = 0;  // per call, the slowest rank
  std::vector<LevelUse> levels;
  size_t messages = 0;
  size_t reallocations = 0;
};

ReplayResult replay(const Fabric& fabric, const PlanSet& plans, const ReplayOptions& o);

}  // namespace strata::sim
