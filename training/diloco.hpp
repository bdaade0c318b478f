// DiLoCo in strata-train: islands of ranks train their own replica (data parallel or ZeRO
// inside the island) and every --diloco-h steps exchange only a pseudo-gradient across
// islands, through the library's strata::OuterSync (include/strata/outer_sync.hpp).
//
//   strata-run -n 4 --hosts 2 -- strata-train --dp 4 --diloco-h 100 --islands 2 ...
//
// Islands are K blocks of consecutive ranks, which the library checks against the
// hierarchy's outermost level (e.g. strata-run's hosts). The global batch is still sliced
// over all ranks, so each island takes batch/K sequences per step and a run sees the same
// tokens as synchronous data parallel. Fragments are strided groups of layers: the
// embeddings, each block, the final LayerNorm.
//
// Validation evaluates the global model (the outer snapshot), which every island holds.
// At the end of a run every replica adopts it. A checkpoint directory holds each island's
// replica as an ordinary checkpoint, DIR/island-<k>/checkpoint.bin (parameters, Adam
// moments, data position), and the outer state in DIR/outer.bin (global parameters and
// outer momentum, canonical order, the same header); resume is bit-exact.
#pragma once

#include <memory>
#include <strata/outer_sync.hpp>
#include <strata/strata.hpp>
#include <string>

#include "checkpoint.hpp"
#include "group.hpp"
#include "options.hpp"
#include "trainer.hpp"

namespace strata::train {

inline constexpr const char* kOuterFile = "outer.bin";

// Checks the DiLoCo flags against each other and the job (before it is joined); sets
// o.outer.every from --diloco-h.
void validate_diloco(Options& o, int world, bool launched);
inline bool diloco_on(const Options& o) { return o.diloco_h > 0; }

// The checkpoint directory of this rank's replica: DIR, or DIR/island-<k> with DiLoCo.
std::string replica_dir(const Options& o, const std::string& dir, int rank, int world);
// replica_dir for --resume, refusing a DiLoCo checkpoint without --diloco-h and the reverse.
std::string resume_dir(const Options& o, int rank, int world);

// The ranks that train one replica: the whole job, or with DiLoCo this rank's island
// (collective over `world`), whose ranks are consecutive ranks of the job, in order.
Group make_group(const Options& o, strata::Comm world);

class Diloco {
 public:
  // Collective over `world`, while every replica still holds the initial parameters.
  Diloco(const Options& o, strata::Comm world, Trainer& trainer);

  void after_step() { outer_.step(); }
  double evaluate(Trainer& trainer);  // validation loss of the global model
  // Collective: the island replicas and DIR/outer.bin (written by rank 0).
  void save(const std::string& dir, Trainer& trainer);
  // `outer`: DIR/outer.bin, opened (and verified) by open_outer before the job started.
  void load(const CheckpointReader& outer, const Trainer& trainer);
  // End of training: pending fragments applied, then every replica takes the global model.
  void finish(Trainer& trainer);
  void close();  // destroys the job's communicator

  std::string describe() const;  // for the start-up lines
  std::string progress() const;  // for the progress line
  std::string summary() const;   // for the last lines

 private:
  const Options& o_;
  strata::Comm world_;
  strata::OuterSync outer_;
};

// DIR/outer.bin, verified, at the same step as this rank's replica checkpoint.
std::unique_ptr<CheckpointReader> open_outer(const std::string& dir, const CheckpointHeader& replica);

}  // namespace strata::train
