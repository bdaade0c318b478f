/* A program written for NCCL, one rank per process, rank 0's unique id passed with
 * MPI_Bcast: it runs on Strata's libnccl.so.2 unchanged (docs/nccl.md). Its buffers are
 * host memory, which Strata's library takes and NVIDIA's does not (use cudaMalloc there).
 *   mpicc nccl_all_reduce.c -I include/nccl -L build/lib/nccl -lnccl -Wl,-rpath,$PWD/build/lib/nccl
 *   mpirun -np 4 ./a.out
 * Prints one line per rank; exit 0 when the sum is right. */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define NCCL_CHECK(call)                                                                          \
  do {                                                                                            \
    ncclResult_t r_ = (call);                                                                     \
    if (r_ != ncclSuccess) {                                                                      \
      fprintf(stderr, "%s: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(NULL));   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
    }                                                                                             \
  } while (0)

int main(int argc, char** argv) {
  int rank, size, i, wrong = 0;
  const int count = 1 << 20;
  ncclUniqueId id;
  ncclComm_t comm;
  float* buf;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));

  buf = malloc(count * sizeof *buf);
  for (i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
  NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL));
  for (i = 0; i < count; ++i) wrong += buf[i] != size * (size + 1) / 2.0f;
  printf("rank %d of %d: all-reduce of %d floats, %d wrong\n", rank, size, count, wrong);

  free(buf);
  NCCL_CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return wrong != 0;
}
