// The data-parallel ranks: a Strata communicator under strata-run, or a single process
// (no STRATA_RANK) where every collective is the identity. Collectives are on float32
// and asynchronous; an empty Request (single process) counts as complete.
//
// The global batch is sliced over data_ranks() ranks, which are the group's own unless
// the group is one island of several (DiLoCo, training/diloco.hpp): then every rank of
// the job takes its slice, and the group reduces over its island only.
#pragma once

#include <cstddef>
#include <strata/strata.hpp>

namespace strata::train {

class Group {
 public:
  Group() = default;  // single process
  explicit Group(strata::Comm comm) : Group(comm, comm.rank(), comm.size()) {}
  Group(strata::Comm comm, int data_rank, int data_ranks)
      : comm_(comm), rank_(comm.rank()), size_(comm.size()), data_rank_(data_rank), data_ranks_(data_ranks) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  int data_rank() const { return data_rank_; }
  int data_ranks() const { return data_ranks_; }
  bool distributed() const { return comm_.valid(); }

  // In place, averaged over ranks.
  strata::Request all_reduce_avg(float* buf, size_t n);
  // send holds size()*n elements; this rank's averaged slice lands in recv (n elements;
  // in place when recv == send + rank*n).
  strata::Request reduce_scatter_avg(const float* send, float* recv, size_t n);
  // In place: this rank's n elements at buf + rank*n go to every rank.
  strata::Request all_gather(float* buf, size_t n);
  double all_reduce_sum(double x);
  void barrier();

  void destroy();

 private:
  strata::Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int data_rank_ = 0;
  int data_ranks_ = 1;
};

}  // namespace strata::train
