// Where each rank sits in the tensor × pipeline × data parallel grid, and how the grid
// lies on the cluster's hierarchy.
//
// The ranks are ordered as the hierarchy nests them (by outermost group, ..., by node,
// then by rank), and the three coordinates are read off that order as the digits of a
// mixed-radix number, innermost first. The default order tp,pp,dp is Megatron's placement
// on a hierarchy: tensor-parallel groups are runs of ranks inside a node (their
// all-reduces are on the critical path, once per layer), pipeline groups come next and
// cross nodes (one activation per microbatch and stage), data parallel is outermost (one
// overlapped reduction per step). `--layout` names another order, innermost first.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace strata::train {

enum Dim : int { kTp = 0, kPp = 1, kDp = 2 };
inline constexpr const char* kDimNames[3] = {"tp", "pp", "dp"};

struct GridShape {
  int size[3] = {1, 1, 1};  // by Dim
  std::array<Dim, 3> order = {kTp, kPp, kDp};  // innermost first
  int ranks() const { return size[0] * size[1] * size[2]; }
};

// "tp,pp,dp" and its permutations; throws TrainError otherwise.
std::array<Dim, 3> parse_grid_order(const std::string& text);
std::string grid_order_text(const std::array<Dim, 3>& order);

// One level of the hierarchy: every rank's group (as strata::HierarchyLevel).
struct GridLevel {
  std::string name;
  std::vector<int> group;
};

class RankGrid {
 public:
  // `levels`: innermost first, as Comm::hierarchy() gives them (empty: one node).
  RankGrid(const GridShape& shape, const std::vector<GridLevel>& levels);

  const GridShape& shape() const { return shape_; }
  int coord(int rank, Dim d) const { return coords_[rank][d]; }
  int rank_at(int tp, int pp, int dp) const;
  // The ranks of `rank`'s group along d (the ranks that differ from it only in d), in
  // order of their coordinate.
  std::vector<int> group(Dim d, int rank) const;
  // Index of `rank`'s group along d among all groups along d (0 .. ranks/size[d]-1).
  int group_index(Dim d, int rank) const;
  // Where a set of ranks lies: "one rank", "inside one node", "across nodes" (inside one
  // island, when there is such a level), "across islands".
  std::string placement(const std::vector<int>& ranks) const;
  // The layout as rank 0 prints it: the grid, each rank's coordinates, and each kind of
  // group with its ranks and where it lies.
  std::string describe() const;

 private:
  GridShape shape_;
  std::vector<GridLevel> levels_;
  std::vector<std::array<int, 3>> coords_;  // by rank
  std::vector<int> rank_of_;                // by tp + T*(pp + P*dp)
};

}  // namespace strata::train
