// Whether a call's large copies into shared-memory FIFOs use non-temporal stores.
//
// An ordinary store first pulls the line into the writer's cache; a FIFO's lines were last
// read by the peer, so when the two cores do not share a cache each pull crosses between
// them. A non-temporal store skips the pull but sends the line to memory, so when they do
// share a cache the reader then misses it there. On the 2-vCPU VM both happen, its cores
// moving between the two placements every few minutes, invisibly to the guest:
// non-temporal FIFO writes made a 2-rank all_reduce much faster in one placement and
// slower in the other (docs/benchmarks.md, "Measured choices"). Neither side's copy time
// alone tells which is better (the writer's cost shows in one placement, the reader's in
// the other), so each cached plan times its whole calls with either kind, tries the other
// kind now and then, and keeps the faster. Grouped send/receive calls learn theirs by the
// bytes they send, like a plan. Only this rank's stores change; the bytes in the FIFO are
// the same, so the peers need not agree.
#pragma once

#include <cstddef>

namespace strata {

class StoreChooser {
 public:
  static constexpr size_t kMinBytes = 1 << 20;   // smaller calls: ordinary stores, untimed
  static constexpr unsigned kFirstCalls = 5;    // a cold call, then alternate kinds
  static constexpr unsigned kExploreEvery = 16;  // later, one call in this many tries the other kind

  // The kind for the next call: true = non-temporal.
  bool streaming() const {
    if (calls_ < kFirstCalls) return calls_ % 2 == 1;
    const bool best = time_[1] < time_[0];
    return calls_ % kExploreEvery == kExploreEvery - 1 ? !best : best;
  }

  // A call took `seconds` with that kind of stores.
  void record(bool streaming, double seconds) {
    // The first call pays page faults and cold caches: timed, it made ordinary stores look
    // several times slower for longer than a benchmark runs.
    if (calls_++ == 0 || seconds <= 0) return;
    double& t = time_[streaming ? 1 : 0];
    t = t == 0 ? seconds : t + kWeight * (seconds - t);
  }

 private:
  static constexpr double kWeight = 0.25;  // of the newest call in the running average
  double time_[2] = {0, 0};  // seconds per call, ordinary and non-temporal; 0: not yet timed
  unsigned calls_ = 0;
};

}  // namespace strata
