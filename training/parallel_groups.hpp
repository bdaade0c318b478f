// One rank's communicators in a tp x pp x dp job, split from the whole job's along the
// rank grid: its tensor-parallel group, its data-parallel group, the two stages that hold
// the tied embedding, and the one-way links to its pipeline neighbours.
#pragma once

#include <array>

#include "group.hpp"
#include "pipeline.hpp"
#include "rank_grid.hpp"

namespace strata::train {

class ParallelGroups {
 public:
  // Collective over `world` (every rank builds the same grid). `ring`: the last stage
  // also sends to the first (interleaved schedules). The global batch is sliced over
  // `data_ranks` ranks, this rank's data-parallel group taking slices `first_slice` +
  // its coordinate: the group's own (0 and shape's dp), unless `world` is one island of
  // several (DiLoCo, training/diloco.hpp), each island taking its share of the batch.
  ParallelGroups(Group world, const GridShape& shape, bool ring, int first_slice = 0, int data_ranks = 0);
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;

  const RankGrid& grid() const { return grid_; }
  int coord(Dim d) const { return grid_.coord(world_.rank(), d); }
  int size(Dim d) const { return grid_.shape().size[d]; }
  bool model_parallel() const { return size(kTp) * size(kPp) > 1; }
  int data_rank() const { return first_slice_ + coord(kDp); }  // this rank's slice of the batch
  int data_ranks() const { return data_ranks_; }               // slices of the global batch
  // DiLoCo lost or took back an island: this island's first slice and the slice count change.
  void reslice(int first_slice, int data_ranks) { first_slice_ = first_slice, data_ranks_ = data_ranks; }

  Group& world() { return world_; }
  Group& tp() { return tp_; }
  Group& dp() { return dp_is_world_ ? world_ : dp_; }
  bool dp_is_world() const { return dp_is_world_; }
  Group* embedding() { return size(kPp) > 1 ? &embedding_ : nullptr; }
  PipeLinks& links() { return links_; }
  // Every group's buffers are in `k`'s memory (Group::set_memory).
  void use_memory(const Kernels& k);
  // Throws the error of any group's failed device call (Group::check).
  void check();

  // Bytes issued so far (Group::bytes) per kind of group: tensor-parallel, pipeline (sent),
  // data-parallel, the tied-embedding pair, and the whole job (when it is not also the
  // data-parallel group).
  enum Traffic { kTpBytes, kPpBytes, kDpBytes, kEmbeddingBytes, kWorldBytes, kTrafficKinds };
  std::array<uint64_t, kTrafficKinds> bytes() const;

  // After a rank failed, collective over the survivors of a pure data-parallel job: the
  // whole job's group shrinks to them and the grid is laid anew over its hierarchy.
  void shrink();
  // After a rank failed, collective over the survivors of any job: every group but the whole
  // job's is aborted (a survivor waiting in one fails at once, and comes here too), and the
  // whole job's group shrinks to the survivors, which it returns (in their old order).
  // These groups can then only be destroyed.
  Group survivors();

  void destroy();

 private:
  Group world_;
  RankGrid grid_;
  Group tp_, dp_, embedding_;
  bool dp_is_world_ = false;
  int first_slice_, data_ranks_;
  void choose_dp_group();
  std::array<Group*, 7> others();  // every group but the whole job's
  PipeLinks links_;
};

// The hierarchy a group sees, as the rank grid takes it.
std::vector<GridLevel> grid_levels(const Group& g);

}  // namespace strata::train
