/* c_shrink_worker: the C API's shrink, compiled as C99 with -pedantic -Werror. Spawned
 * directly by test_shrink (strata-run would stop the survivors): rank SHRINK_KILL SIGKILLs
 * itself after a barrier; the others' all_reduce (or that barrier, which the victim can leave
 * and die in before a survivor has left it) fails with strataRemoteError naming it,
 * strataCommShrink gives them a communicator of the survivors in their old order, and an
 * all_reduce of each survivor's old rank there is checked. Prints "C-SHRINK old=R new=R'
 * size=N sum=S ok=1" and exits 0 when right. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

#define CHECK_CALL(call)                                                                          \
  do {                                                                                            \
    strataResult_t r_ = (call);                                                                   \
    if (r_ != strataSuccess) {                                                                    \
      fprintf(stderr, "FAIL %s returned %s: %s\n", #call, strataGetErrorString(r_), strataGetLastError()); \
      return 2;                                                                                   \
    }                                                                                             \
  } while (0)

int main(void) {
  strataComm_t comm = NULL, shrunk = NULL;
  int rank = -1, n = 0, victim, new_rank = -1, new_n = 0, r;
  double mine, sum = 0, expected = 0;
  const char* v = getenv("SHRINK_KILL");
  strataResult_t res;

  victim = v ? atoi(v) : 2;
  CHECK_CALL(strataCommInitFromEnv(&comm));
  CHECK_CALL(strataCommRank(comm, &rank));
  CHECK_CALL(strataCommCount(comm, &n));
  res = strataBarrier(comm, NULL);
  if (rank == victim) {
    if (res != strataSuccess) return 2;
    raise(SIGKILL);
  }
  if (res == strataSuccess) {
    mine = rank;
    res = strataAllReduce(&mine, &sum, 1, strataFloat64, strataSum, comm, NULL);
  }
  if (res != strataRemoteError && res != strataTimeout) {
    fprintf(stderr, "FAIL the barrier or all_reduce around the kill returned %s\n", strataGetErrorString(res));
    strataCommDestroy(comm);
    return 3;
  }
  fprintf(stderr, "C-CAUGHT %s: %s\n", strataGetErrorString(res), strataGetLastError());
  CHECK_CALL(strataCommShrink(comm, &shrunk));
  CHECK_CALL(strataCommRank(shrunk, &new_rank));
  CHECK_CALL(strataCommCount(shrunk, &new_n));
  mine = rank; /* the old rank: the sum says which ranks are in it */
  CHECK_CALL(strataAllReduce(&mine, &sum, 1, strataFloat64, strataSum, shrunk, NULL));
  for (r = 0; r < n; ++r)
    if (r != victim) expected += r;
  res = strataBarrier(comm, NULL); /* the parent is unusable after the shrink */
  fprintf(stderr, "C-SHRINK old=%d new=%d size=%d sum=%g ok=%d parent=%s\n", rank, new_rank, new_n, sum,
          sum == expected && new_n == n - 1 && new_rank == rank - (rank > victim) && res != strataSuccess,
          strataGetErrorString(res));
  CHECK_CALL(strataCommDestroy(shrunk));
  CHECK_CALL(strataCommDestroy(comm));
  return sum == expected && new_n == n - 1 && new_rank == rank - (rank > victim) && res != strataSuccess ? 0 : 5;
}
