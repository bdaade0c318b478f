// Where a job's ranks start: each rank of a machine on a CPU of its own, in rank order over
// its mask, or left where it is when that is not possible (src/core/placement).
#include <gtest/gtest.h>

#include "core/placement.hpp"

namespace strata {
namespace {

RankCpus on(const char* machine, std::initializer_list<int> cpus) {
  RankCpus r{machine, std::vector<uint64_t>(2, 0)};
  for (int c : cpus) r.mask[static_cast<size_t>(c / 64)] |= uint64_t{1} << (c % 64);
  return r;
}

TEST(Placement, RanksOfAMachineTakeItsCpusInRankOrder) {
  // Two machines, interleaved: each counts only its own ranks.
  std::vector<RankCpus> job = {on("a", {0, 1, 2, 3}), on("b", {0, 1}), on("a", {0, 1, 2, 3}), on("b", {0, 1})};
  EXPECT_EQ(own_cpu(0, job), 0);
  EXPECT_EQ(own_cpu(1, job), 0);
  EXPECT_EQ(own_cpu(2, job), 1);
  EXPECT_EQ(own_cpu(3, job), 1);
}

TEST(Placement, EachRankPicksFromItsOwnMask) {
  // Bound per socket by a launcher: the i-th rank of the machine takes the i-th CPU of its
  // own mask, so the two sockets' ranks land on distinct CPUs.
  std::vector<RankCpus> job = {on("a", {4, 5, 70, 71}), on("a", {4, 5, 70, 71}), on("a", {8, 9, 10, 11}),
                               on("a", {8, 9, 10, 11})};
  EXPECT_EQ(own_cpu(0, job), 4);
  EXPECT_EQ(own_cpu(1, job), 5);
  EXPECT_EQ(own_cpu(2, job), 10);
  EXPECT_EQ(own_cpu(3, job), 11);
}

TEST(Placement, LeavesRanksBeWhereTheyMustShareOrAreBound) {
  std::vector<RankCpus> over = {on("a", {0, 1}), on("a", {0, 1}), on("a", {0, 1})};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(own_cpu(r, over), -1) << "3 ranks on 2 CPUs";
  std::vector<RankCpus> bound = {on("a", {0}), on("a", {1})};
  EXPECT_EQ(own_cpu(0, bound), -1);
  EXPECT_EQ(own_cpu(1, bound), -1);
}

}  // namespace
}  // namespace strata
