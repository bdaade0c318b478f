// strata-train's recovery policy (--on-failure): what a rank does when a failure
// interrupts a step, an evaluation or a save. shrink: a rank of the job died and the
// survivors go on without it, from their own state or from the last checkpoint
// (relayout.hpp); continue (DiLoCo): an island lost a rank, and the islands that are whole
// go on without it (island_failure.cpp). Otherwise a failure ends the run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data.hpp"
#include "diloco.hpp"
#include "kernels.hpp"
#include "options.hpp"
#include "parallel_groups.hpp"
#include "trainer.hpp"

namespace strata::train {

// What a failure can replace, and where the run stands: the training loop reads it, the
// recovery policy changes it. Destroyed in the reverse order: DiLoCo, the trainer, the groups.
struct RunState {
  std::unique_ptr<ParallelGroups> groups;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<Diloco> diloco;
  bool root = false;      // the rank that prints: rank 0 of the survivors after a shrink
  int settled = 0;        // the last step whose evaluation and saving are done
  int door_checked = -1;  // the last step replacements were looked for
  bool shrunk = false;    // a failure was survived: the job is no longer the shape it started as
  bool leaves = false;    // this rank is not needed by the layout the survivors chose
};

// What a recovery did, for strata-train to print.
struct RecoveryReport {
  // The line this rank prints, with its newline: rank 0 of the ranks that go on says how
  // they go on, a rank that leaves says so; empty for the others.
  std::string line;
};

class RecoveryPolicy {
 public:
  // `rank` and `world`: this process's in the job as the launcher started it.
  RecoveryPolicy(Options& o, const TokenData& data, const Kernels& kernels, int rank, int world)
      : o_(o), data_(data), kernels_(kernels), rank_(rank), world_(world) {}

  // Runs `work`: nullopt when it completed. When a failure that --on-failure covers
  // interrupted it, `state` is where the survivors go on from (or state.leaves) and the
  // report says what happened. Any other failure is rethrown; a TrainError when the
  // failure ends this rank (its island lost a rank, or the other islands went on without it).
  std::optional<RecoveryReport> run(const std::function<void()>& work, RunState& state) const;

 private:
  // --on-failure continue, a failure between islands: the islands that are whole go on.
  RecoveryReport without_lost_islands(const OuterFailure& failure, RunState& s) const;
  // --on-failure shrink, a rank died during step `at` (t0: when it was seen): from the
  // last checkpoint on fewer ranks where the state died with it, else from the survivors'
  // own state.
  RecoveryReport from_checkpoint(int at, double t0, RunState& s) const;
  RecoveryReport from_own_state(const strata::PeerError& peer, int at, double t0, RunState& s) const;

  Options& o_;
  const TokenData& data_;
  const Kernels& kernels_;
  const int rank_, world_;
};

}  // namespace strata::train
