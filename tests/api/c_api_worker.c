/* c_api_worker: compiled as C99 with -pedantic -Werror to prove strata.h is valid C.
 * Run under strata-run: all_reduce, broadcast, async + strataWait/strataTest, grouped
 * send/recv around a ring and to self, split with STRATA_SPLIT_NOCOLOR, each checked
 * against a serial reference. Exit 0 when every check passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

static int g_rank = -1, g_passed = 0, g_failed = 0;

#define CHECK_CALL(call)                                                                        \
  do {                                                                                          \
    strataResult_t r_ = (call);                                                                 \
    if (r_ != strataSuccess) {                                                                  \
      fprintf(stderr, "FAIL rank %d: %s returned %s: %s\n", g_rank, #call,                       \
              strataGetErrorString(r_), strataGetLastError());                                  \
      exit(2);                                                                                  \
    }                                                                                           \
  } while (0)

static void result(const char* what, long bad_index, double got, double expected) {
  if (bad_index < 0) {
    ++g_passed;
  } else {
    ++g_failed;
    fprintf(stderr, "FAIL rank %d: %s: index %ld got %.17g expected %.17g\n", g_rank, what, bad_index,
            got, expected);
  }
}

/* small integers: float sums are exact */
static int32_t ival(int rank, size_t i) { return (int32_t)((rank + 1) * 1000003 + (int32_t)(i * 7919 % 2001)) - 1000; }
static float fval(int rank, size_t i) { return (float)((int)((i * 31 + (size_t)rank * 17) % 41) - 20); }

int main(void) {
  strataComm_t comm = NULL, sub = NULL;
  int n = 0, i;
  size_t k;
  const size_t count = 1001;
  int32_t *xi, *yi;
  float *xf, *yf;
  double *xd;
  strataRequest_t req = NULL, req2 = NULL;
  strataResult_t tr;

  CHECK_CALL(strataCommInitFromEnv(&comm));
  CHECK_CALL(strataCommRank(comm, &g_rank));
  CHECK_CALL(strataCommCount(comm, &n));

  xi = (int32_t*)malloc(count * sizeof(int32_t));
  yi = (int32_t*)malloc(count * sizeof(int32_t));
  xf = (float*)malloc(count * sizeof(float));
  yf = (float*)malloc((size_t)n * count * sizeof(float));
  xd = (double*)malloc(count * sizeof(double));

  /* blocking all_reduce int32 sum */
  {
    long bad = -1;
    int64_t got = 0, exp = 0;
    for (k = 0; k < count; ++k) xi[k] = ival(g_rank, k);
    CHECK_CALL(strataAllReduce(xi, yi, count, strataInt32, strataSum, comm, NULL));
    for (k = 0; k < count && bad < 0; ++k) {
      exp = 0;
      for (i = 0; i < n; ++i) exp += ival(i, k);
      if (yi[k] != (int32_t)exp) {
        bad = (long)k;
        got = yi[k];
      }
    }
    result("strataAllReduce int32 sum", bad, (double)got, (double)exp);
  }
  /* async all_reduce float32 max, polled with strataTest */
  {
    long bad = -1;
    float exp = 0;
    for (k = 0; k < count; ++k) xf[k] = fval(g_rank, k);
    CHECK_CALL(strataAllReduce(xf, yf, count, strataFloat32, strataMax, comm, &req));
    while ((tr = strataTest(req)) == strataInProgress) {
    }
    CHECK_CALL(tr);
    for (k = 0; k < count && bad < 0; ++k) {
      exp = fval(0, k);
      for (i = 1; i < n; ++i)
        if (fval(i, k) > exp) exp = fval(i, k);
      if (yf[k] != exp) bad = (long)k;
    }
    result("strataAllReduce float32 max (strataTest)", bad, bad >= 0 ? yf[bad] : 0, exp);
  }
  /* in-place async broadcast float64 from the last rank, and an all_gather, then strataWait */
  {
    long bad = -1;
    double exp = 0;
    for (k = 0; k < count; ++k) xd[k] = g_rank == n - 1 ? (double)k * 0.5 - 3.0 : -1.0;
    for (k = 0; k < count; ++k) xf[k] = fval(g_rank, k);
    CHECK_CALL(strataBroadcast(xd, xd, count, strataFloat64, n - 1, comm, &req));
    CHECK_CALL(strataAllGather(xf, yf, count, strataFloat32, comm, &req2));
    CHECK_CALL(strataWait(req2));
    CHECK_CALL(strataWait(req));
    for (k = 0; k < count && bad < 0; ++k) {
      exp = (double)k * 0.5 - 3.0;
      if (xd[k] != exp) bad = (long)k;
    }
    result("strataBroadcast float64 in-place (strataWait)", bad, bad >= 0 ? xd[bad] : 0, exp);
    bad = -1;
    for (i = 0; i < n && bad < 0; ++i)
      for (k = 0; k < count && bad < 0; ++k)
        if (yf[(size_t)i * count + k] != fval(i, k)) {
          bad = (long)((size_t)i * count + k);
          exp = fval(i, k);
        }
    result("strataAllGather float32", bad, bad >= 0 ? yf[bad] : 0, exp);
  }
  /* grouped send/recv: to the next rank, from the previous one, and to self */
  {
    long bad = -1;
    int next = (g_rank + 1) % n, prev = (g_rank - 1 + n) % n;
    int32_t* self_in = (int32_t*)malloc(count * sizeof(int32_t));
    for (k = 0; k < count; ++k) xi[k] = ival(g_rank, k) ^ 0x5555;
    memset(yi, 0, count * sizeof(int32_t));
    memset(self_in, 0, count * sizeof(int32_t));
    CHECK_CALL(strataGroupStart(comm));
    CHECK_CALL(strataSend(xi, count, strataInt32, next, comm, NULL));
    CHECK_CALL(strataRecv(yi, count, strataInt32, prev, comm, NULL));
    CHECK_CALL(strataSend(xi, count, strataInt32, g_rank, comm, NULL));
    CHECK_CALL(strataRecv(self_in, count, strataInt32, g_rank, comm, NULL));
    CHECK_CALL(strataGroupEnd(comm, NULL));
    for (k = 0; k < count && bad < 0; ++k)
      if (yi[k] != (ival(prev, k) ^ 0x5555) || self_in[k] != xi[k]) bad = (long)k;
    result("grouped strataSend/strataRecv ring + self", bad, bad >= 0 ? yi[bad] : 0,
           bad >= 0 ? (ival(prev, (size_t)bad) ^ 0x5555) : 0);
    free(self_in);
  }
  /* split: rank 0 opts out, the others sum their ranks */
  {
    long bad = -1;
    int64_t mine = g_rank, tot = -1, exp = 0;
    CHECK_CALL(strataCommSplit(comm, g_rank == 0 ? STRATA_SPLIT_NOCOLOR : 1, 0, &sub));
    if (g_rank == 0) {
      if (sub != NULL) bad = 0;
      result("strataCommSplit NOCOLOR gives NULL", bad, 0, 0);
    } else if (sub == NULL) {
      result("strataCommSplit color 1 gives a communicator", 0, 0, 1);
    } else {
      CHECK_CALL(strataAllReduce(&mine, &tot, 1, strataInt64, strataSum, sub, NULL));
      for (i = 1; i < n; ++i) exp += i;
      if (tot != exp) bad = 0;
      result("strataAllReduce int64 on split communicator", bad, (double)tot, (double)exp);
      CHECK_CALL(strataCommDestroy(sub));
    }
  }
  CHECK_CALL(strataBarrier(comm, NULL));
  CHECK_CALL(strataCommDestroy(comm));
  printf("c_api_worker rank %d/%d: %d checks passed, %d failed\n", g_rank, n, g_passed, g_failed);
  free(xi);
  free(yi);
  free(xf);
  free(yf);
  free(xd);
  return g_failed ? 1 : 0;
}
