#include "parallel_groups.hpp"

#include <stdexcept>

namespace strata::train {

std::vector<GridLevel> grid_levels(const Group& g) {
  std::vector<GridLevel> out;
  for (const strata::HierarchyLevel& l : g.hierarchy()) out.push_back({l.name, l.group});
  return out;
}

ParallelGroups::ParallelGroups(Group world, const GridShape& shape, bool ring, int first_slice, int data_ranks)
    : world_(world),
      grid_(shape, grid_levels(world)),
      first_slice_(first_slice),
      data_ranks_(data_ranks > 0 ? data_ranks : shape.size[kDp]) {
  const int me = world_.rank();
  // Every rank takes the same branches: a split is collective over the world.
  if (size(kTp) > 1) tp_ = world_.split(grid_.group_index(kTp, me), coord(kTp));
  choose_dp_group();
  const int P = size(kPp), stage = coord(kPp), column = grid_.group_index(kPp, me);
  if (P == 1) return;
  embedding_ = world_.split(stage == 0 || stage == P - 1 ? column : -1, stage);
  // Link i joins stage i and stage i+1 (mod P), one direction per communicator: activations
  // go i -> i+1, gradients i+1 -> i; the sender is rank 0 of the link. Links i and i+2
  // share no stage, so one split makes every other link; a ring of odd length needs a
  // third split for its closing link.
  const int links = ring ? P : P - 1;
  auto colour = [&](int i) { return ring && P % 2 && i == P - 1 ? 2 : i % 2; };
  const int rounds = ring && P % 2 ? 3 : std::min(links, 2);
  const int columns = shape.ranks() / P;
  for (bool activations : {true, false}) {
    for (int round = 0; round < rounds; ++round) {
      // This rank is stage `stage` of link `stage` and stage+1 of link `stage - 1`.
      const int out_link = stage, in_link = (stage - 1 + P) % P;
      int link = -1, key = 0;
      if (out_link < links && colour(out_link) == round) link = out_link, key = activations ? 0 : 1;
      if (in_link < links && colour(in_link) == round) link = in_link, key = activations ? 1 : 0;
      Group g = world_.split(link < 0 ? -1 : link * columns + column, key);
      if (link < 0) continue;
      const bool sending_side = link == out_link;  // the link to the next stage
      if (activations) (sending_side ? links_.act_out : links_.act_in) = g;
      else (sending_side ? links_.grad_in : links_.grad_out) = g;
    }
  }
}

// The whole job serves as the data-parallel group only if its ranks are in the order of
// their data-parallel coordinates (the hierarchy may order them otherwise).
void ParallelGroups::choose_dp_group() {
  const GridShape& shape = grid_.shape();
  dp_is_world_ = shape.size[kDp] == shape.ranks();
  for (int r = 0; r < shape.ranks(); ++r) dp_is_world_ &= grid_.coord(r, kDp) == r;
  if (size(kDp) > 1 && !dp_is_world_) dp_ = world_.split(grid_.group_index(kDp, world_.rank()), coord(kDp));
}

void ParallelGroups::shrink() {
  if (model_parallel()) throw std::logic_error("only a pure data-parallel job goes on after a failure");
  Group survivors = world_.shrink();
  dp_.destroy();
  world_.destroy();
  world_ = survivors;
  GridShape shape = grid_.shape();
  shape.size[kDp] = world_.size();
  grid_ = RankGrid(shape, grid_levels(world_));
  choose_dp_group();
}

std::array<Group*, 7> ParallelGroups::others() {
  return {&links_.act_out, &links_.act_in, &links_.grad_out, &links_.grad_in, &embedding_, &tp_, &dp_};
}

Group ParallelGroups::survivors() {
  for (Group* g : others()) g->abort();
  Group left = world_.shrink();
  world_.destroy();
  return left;
}

std::array<uint64_t, ParallelGroups::kTrafficKinds> ParallelGroups::bytes() const {
  return {tp_.bytes(), links_.act_out.bytes() + links_.grad_out.bytes(),
          dp_is_world_ ? world_.bytes() : dp_.bytes(), embedding_.bytes(),
          dp_is_world_ ? 0 : world_.bytes()};
}

void ParallelGroups::destroy() {
  for (Group* g : others()) g->destroy();
  world_.destroy();
}

void ParallelGroups::use_memory(const Kernels& k) {
  for (Group* g : others()) g->set_memory(&k);
  world_.set_memory(&k);
}

void ParallelGroups::check() {
  for (Group* g : others()) g->check();
  world_.check();
}

}  // namespace strata::train
