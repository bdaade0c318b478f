// perf::Backend over MPI_COMM_WORLD (OpenMPI), the reference point for strata-perf:
//   all_reduce MPI_Allreduce, reduce_scatter MPI_Reduce_scatter_block, all_gather
//   MPI_Allgather, broadcast MPI_Bcast, reduce MPI_Reduce, all_to_all MPI_Alltoall,
//   sendrecv MPI_Sendrecv to rank+1 from rank-1; in place with MPI_IN_PLACE
//   (MPI_Sendrecv_replace for sendrecv).
//   pipeline MPI_Sendrecv as sendrecv, with MPI_PROC_NULL past the ends of the chain.
// Where MPI's semantics differ from nccl's, the backend adds the host work needed to
// produce nccl's result (it is inside the timed region):
//   - out-of-place broadcast: the root copies send to recv (MPI_Bcast has one buffer);
//   - in-place reduce_scatter: MPI leaves the block at the start of the buffer, nccl at
//     offset rank*count; ranks other than 0 move it there;
//   - avg: MPI_SUM, then each rank holding the result divides it by the rank count.
#pragma once

#include <memory>

#include "backend.hpp"
#include "mpi_types.hpp"

namespace perf {

class MpiBackend : public Backend {
 public:
  MpiBackend();  // MPI_Init
  ~MpiBackend() override;  // MPI_Finalize

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void run(const CollCall& call) override;
  void barrier() override;
  double all_reduce(double v, ScalarOp op) override;
  void abort() noexcept override;

 private:
  void divide_by_size(void* buf, size_t count, DataType t) const;
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<MpiTypes> types_;
};

}  // namespace perf
