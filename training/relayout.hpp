// The groups a layout needs, and strata-train --on-failure shrink where a rank holds state
// no other rank has (tensor or pipeline parallelism, ZeRO 1 and 2): what died with it is
// gone, so the survivors take the last complete checkpoint up again on the largest layout
// that fits them (docs/training.md, "A rank fails").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "group.hpp"
#include "options.hpp"
#include "parallel_groups.hpp"

namespace strata::train {

// The tp x pp x (dp / islands) groups over `world` (the job, or under DiLoCo one island),
// laid out as the options say; its data-parallel ranks take slices `first_slice`, ... of the
// global batch's o.dp.
std::unique_ptr<ParallelGroups> make_groups(const Options& o, Group world, int first_slice);

// Whether a rank that dies takes state no other rank holds: then the survivors go on from
// a checkpoint (relayout_after_failure), else from their own state (Trainer::go_on_after_failure).
inline bool state_dies_with_a_rank(const Options& o) { return o.tp * o.pp > 1 || o.zero > 0; }

struct Relayout {
  bool stays = false;       // false: the new layout does not need this rank, which leaves
  int survivors = 0;        // ranks alive after the failure
  std::vector<int> lost;    // the ranks that are not (of the job before the failure)
  int dp = 0;               // the new layout's data-parallel ranks (tp and pp stay)
  int checkpoint_step = 0;  // of the checkpoint every rank that stays reloads (0: none yet, the initial model)
  std::string checkpoint_dir;  // where it is: --save, or --resume before this run saved one
  Group world;              // the ranks that stay, in their old order
  std::string lost_text() const;  // "rank 5", "ranks 2, 5"
};

// Collective over the survivors, after a failure: `groups`' other groups are aborted and
// its world shrinks to the survivors; the first tp x pp x dp' of them stay, dp' the largest
// data-parallel size that fits them and that the options allow (the global batch and
// microbatches must divide), and set o.dp; those agree on the last checkpoint (in --save,
// else --resume; TrainError when they read different ones). `groups` can then only be destroyed.
Relayout relayout_after_failure(Options& o, ParallelGroups& groups);

}  // namespace strata::train
