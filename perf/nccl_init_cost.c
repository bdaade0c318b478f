/* What a small NCCL communicator costs to make and end on Strata's libnccl.so.2 (PyTorch
 * makes a 2-rank one per pair of ranks that send to each other): ncclCommInitAll of a
 * 1-rank and a 2-rank communicator in this process (each rank on its own thread: the
 * bootstrap, the connections, the shared-memory segments), then ncclCommDestroy of each
 * rank; the median and the fastest of N rounds.
 *   build/bin/nccl-init-cost [N]        (default 20) */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 20;
  int n, r, i;
  double* t = malloc((size_t)(rounds > 0 ? rounds : 1) * sizeof *t);
  for (n = 1; n <= 2; ++n) {
    for (r = 0; r < rounds; ++r) {
      ncclComm_t comms[2];
      const double t0 = now();
      ncclResult_t res = ncclCommInitAll(comms, n, NULL);
      for (i = 0; res == ncclSuccess && i < n; ++i) res = ncclCommDestroy(comms[i]);
      if (res != ncclSuccess) {
        fprintf(stderr, "nccl-init-cost: %s: %s\n", ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
      }
      t[r] = now() - t0;
    }
    qsort(t, (size_t)rounds, sizeof *t, by_value);
    printf("%d-rank communicator, create + destroy: median %.2f ms, fastest %.2f ms (%d rounds)\n", n,
           1e3 * t[rounds / 2], 1e3 * t[0], rounds);
  }
  free(t);
  return 0;
}
