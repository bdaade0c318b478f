// MPI datatypes and operators for the library's DataType/ReduceOp. MPI has no half or bfloat16, so
// reductions on them use a 2-byte derived type with user-defined (commutative) sum, prod,
// max and min that compute in float and round back. avg has no MPI operator: callers
// reduce with sum and divide by the rank count afterwards.
#pragma once

#include <mpi.h>

#include "timed_op.hpp"

namespace perf {

class MpiTypes {
 public:
  MpiTypes();  // after MPI_Init
  ~MpiTypes();  // before MPI_Finalize
  MpiTypes(const MpiTypes&) = delete;
  MpiTypes& operator=(const MpiTypes&) = delete;

  // `reduction`: the datatype to combine with op(); else a plain type of the same size.
  MPI_Datatype datatype(DataType t, bool reduction) const;
  MPI_Op op(DataType t, ReduceOp op) const;

 private:
  MPI_Op user_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum prod max min
};

}  // namespace perf
