// DiLoCo in strata-train: islands of ranks train their own replica (any tp x pp x dp
// layout with ZeRO inside the island) and every --diloco-h steps exchange only a
// pseudo-gradient across islands, through the library's strata::OuterSync
// (include/strata/outer_sync.hpp).
//
//   strata-run -n 8 --hosts 2 -- strata-train --tp 2 --pp 2 --dp 2 --diloco-h 100 --islands 2 ...
//
// Islands are K blocks of consecutive ranks, each a union of the groups of the job's
// outermost hierarchy level (e.g. strata-run's hosts). Each (tp, pp) position of the grid
// holds one shard of the model; the outer sync of a shard runs over the ranks that hold it
// in every island (its data-parallel ranks in each), so each rank carries 1/(tp·pp·dp/K)
// of the pseudo-gradient across the slow link. The global batch is still sliced over all
// data-parallel ranks, so each island takes batch/K sequences per step and a run sees the
// same tokens as synchronous data parallel. Fragments are strided groups of layers of the
// whole model: the embeddings, each block, the final LayerNorm (a pipeline stage names
// the groups it lacks with length 0, so fragment p is the same layers on every stage).
// The two copies of the tied embedding (first stage, last stage's head) stay equal in
// every wire format: each is the first tensor of its stage's buffer, so of fragment 0, and
// its piece (256/tp · dim elements, dim a multiple of tp) is whole blocks of 64 — both are
// quantised in the same blocks, and the averaging and the outer step are per element.
//
// Validation evaluates the global model (the outer snapshot), which every island holds.
// At the end of a run every replica adopts it. A checkpoint directory holds each island's
// replica as an ordinary checkpoint, DIR/island-<k>/checkpoint.bin (parameters, Adam
// moments, data position), and the outer state in DIR/outer.bin (global parameters and
// outer momentum, canonical order, the same header, gathered by island 0); resume is
// bit-exact.
#pragma once

#include <functional>
#include <memory>
#include <strata/outer_sync.hpp>
#include <strata/strata.hpp>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "group.hpp"
#include "options.hpp"
#include "trainer.hpp"

namespace strata::train {

inline constexpr const char* kOuterFile = "outer.bin";

inline bool diloco_on(const Options& o) { return o.diloco_h > 0; }
// The island of job rank `rank` (0 without DiLoCo), and the first of the global batch's
// data-parallel slices it takes (its island takes dp/K of them).
int island_of(const Options& o, int rank, int world);
inline int first_slice(const Options& o, int rank, int world) {
  return diloco_on(o) ? island_of(o, rank, world) * (o.dp / o.outer.islands) : 0;
}

// The checkpoint directory of this rank's replica: DIR, or DIR/island-<k> with DiLoCo.
std::string replica_dir(const Options& o, const std::string& dir, int rank, int world);
// replica_dir for --resume, refusing a DiLoCo checkpoint without --diloco-h and the reverse.
std::string resume_dir(const Options& o, int rank, int world);

// The ranks that train one replica: the whole job, or with DiLoCo this rank's island
// (collective over `world`), whose ranks are consecutive ranks of the job, in order.
// Throws TrainError when the islands split a group of the job's outermost hierarchy level.
Group make_group(const Options& o, strata::Comm world);

// What the ranks of a job grown back with a replacement island learn of each other
// (training/island_heal.cpp).
struct Welcome {
  std::vector<int> started_as;  // by rank: its rank in the job as it started
  std::vector<char> newcomer;   // by rank
  int islands = 0;              // the grown job's
  Group island;                 // a newcomer's own island (one process elsewhere)
};
// Collective over a job grown back (Comm::grow, Comm::join): the ranks learn who is new,
// the newcomers (whole islands, or TrainError everywhere) make their island's group, and
// o's --islands, --dp and --batch grow back with the islands (each keeping its share).
Welcome meet(Options& o, strata::Comm grown, int started_as, bool newcomer);

class Diloco {
 public:
  // Collective over `job`, while every replica still holds the initial parameters; `groups`:
  // this rank's groups inside its island, whose (tp, pp) coordinates name its shard.
  Diloco(const Options& o, strata::Comm job, Trainer& trainer, ParallelGroups& groups);
  // A rank of a replacement island (strata-train --join), after meet(): collective with
  // take_back() on the others; the trainer takes a live island's state.
  Diloco(const Options& o, strata::Comm job, Trainer& trainer, ParallelGroups& groups, const Welcome& welcome);

  // The outer schedule's step; with --on-failure continue, at an outer step's boundary also
  // keep() what the islands would go back to.
  void after_step(Trainer& trainer);
  double evaluate(Trainer& trainer);  // validation loss of the global model
  // Collective: the island replicas and DIR/outer.bin (written by rank 0).
  void save(const std::string& dir, Trainer& trainer);
  // `outer`: DIR/outer.bin, opened (and verified) by open_outer before the job started.
  void load(const CheckpointReader& outer, const Trainer& trainer);
  // End of training: pending fragments applied, then every replica takes the global model.
  void finish(Trainer& trainer);
  void close();  // destroys the job's communicator

  std::string describe() const;                 // for the start-up lines
  std::string progress() const;                 // for the progress line
  std::string summary();                        // for the last lines; collective over the job (the bytes of all ranks)
  int job_rank() const { return job_.rank(); }  // in the islands that are left

  // --on-failure continue (training/island_failure.cpp). keep(): this rank's replica and
  // outer state at an outer step's boundary, in memory, which is where the islands go back
  // to when one is lost (collective over the island: the outer momentum is gathered).
  void keep(Trainer& trainer);
  struct IslandLoss {
    bool stays = false;          // false: this rank's island is not whole (or was left behind): it stops
    std::string why;             // why it stops, when it does
    std::vector<int> lost;       // the islands that stop (their indices before)
    std::vector<int> dead;       // the job's ranks that are gone
    int islands = 0;             // the islands that go on
    int step = 0;                // the outer step they go back to
    std::vector<int> caught_up;  // of those (new indices), the ones that missed the end of its exchange
  };
  // After an OuterFailure, collective over the job's ranks still alive: the outer sync is
  // aborted, the job's communicator shrinks to them, the islands that are whole (and kept
  // the latest outer step) go on as a job of fewer islands -- o's --islands, --dp and
  // --batch shrink with them, each island keeping its share -- from the state keep()
  // kept, on an outer sync over the islands left. PeerError when the others left this rank
  // out. Rank 0 then opens the door for replacements at the job's rendezvous
  // (strata::LaunchInfo::rendezvous), when it has one.
  IslandLoss go_on_without_lost_islands(Options& o, Trainer& trainer, ParallelGroups& groups);

  // At an outer step's boundary, after keep(), collective: how many replacements wait at
  // the door (0 when none is open).
  int newcomers();
  struct Healing {
    bool healed = false;
    std::string why;           // why not
    std::vector<int> islands;  // the islands that came back (their indices in the grown job)
    int donor = -1;            // the island whose state they took
    uint64_t bytes = 0;        // sent to the newcomers by all ranks of the donor island
    double seconds = 0;        // from the grow to the outer sync over all islands
  };
  // Collective: the job grows with the `waiting` newcomers (Comm::grow), which take a live
  // island's replica, outer state and data position, shard by shard, at the outer step
  // keep() just kept; then every island goes on with an outer sync over all of them. A
  // grow that fails (a newcomer left) leaves everything as it was (healed false).
  Healing take_back(Options& o, Trainer& trainer, ParallelGroups& groups, int waiting);

 private:
  // Which shard of the model this rank holds: its (tp, pp) position, and under ZeRO-3 its
  // data-parallel rank too; the outer sync of a shard runs over its holders in every island.
  static int shard_id(const Options& o, ParallelGroups& groups);
  // The outer sync over the ranks that hold this rank's shard in every island of job_.
  void connect(Trainer& trainer);
  // Collective over a grown job: the newcomers take a live island's kept state (each from
  // the rank at its coordinates), and every rank goes back to it on an outer sync over all
  // the islands. Returns the bytes all ranks sent.
  uint64_t settle(Trainer& trainer, ParallelGroups& groups, const Welcome& w);
  // Collective over the job: each rank whose `takes` (by rank; whole islands) is set
  // receives, from the rank at its coordinates in the first island that takes nothing,
  // that rank's kept outer state and outer step, with `replica` also its kept replica
  // (parameters, Adam moments, step, data position). The bytes all ranks sent.
  uint64_t share_kept(const std::vector<char>& takes, ParallelGroups& groups, bool replica);
  // While islands are missing: rank 0 opens the door for their replacements at the job's
  // rendezvous (strata::LaunchInfo::rendezvous), if the job has one (collective).
  void wait_for_replacements();
  const Options& o_;
  strata::Comm job_;
  int started_as_;  // this rank in the job as it started: its key when the job shrinks or grows
  int island_;
  bool door_ = false;   // the islands left wait for replacements
  int shard_id_;        // shard_id()
  strata::Comm shard_;  // the ranks that hold this rank's shard, island after island
  strata::OuterSync outer_;
  // The parameters the outer sync reads and writes: the trainer's on the host; on a device
  // a host copy of them (staged_), filled by pull() before each outer call and copied back
  // by push() after it, around the inner steps whose outer step touches them. (The outer
  // step is a few vector operations per parameter once every H steps, next to an exchange
  // between islands that goes through host memory anyway; the copies cost two transfers
  // of this rank's parameters per such step.)
  std::vector<float> staged_;
  float* outer_params(Trainer& trainer) { return staged_.empty() ? trainer.params() : staged_.data(); }
  void pull(Trainer& trainer);
  void push(Trainer& trainer);
  // Of the outer syncs before outer_ (the islands lost or took back one), and the release of
  // outer_ (`failed`: aborted, without waiting for a peer) keeping its counts there.
  strata::OuterSyncStats earlier_;
  void retire_outer(bool failed);
  strata::OuterSyncStats stats() const;  // earlier_ and outer_'s together
  // What keep() kept: the replica, and the outer state (buffer order) at outer step kept_steps_.
  Trainer::Kept kept_;
  std::vector<float> kept_snapshot_, kept_momentum_;
  long long kept_steps_ = -1;
};

// Runs a call that crosses islands; a PeerError from it becomes an OuterFailure.
void between_islands(const std::function<void()>& call);

// DIR/outer.bin, verified, at the same step as this rank's replica checkpoint.
std::unique_ptr<CheckpointReader> open_outer(const std::string& dir, const CheckpointHeader& replica);

}  // namespace strata::train
