/* Every NCCL collective x type x operator, out of place and in place, on host buffers,
 * against a serial computation of what every rank contributed: compiled as C99 against
 * NVIDIA's nccl.h (where installed) and linked with Strata's libnccl.so.2.
 *   strata-run -n 3 collectives_check ID_FILE        (or mpirun -np 3 ...)
 * Also: ncclBcast, ncclGather/ncclScatter, a ring of ncclSend/ncclRecv in a group, and a
 * call with count 0. Buffers are host memory, or device memory (harness.h): CUDA's when
 * built with HARNESS_CUDA (collectives_check_cuda: tests/nccl/gpu_checks.sh), Strata's
 * device layer's with HARNESS_STRATA_DEVICE (collectives_check_device, run with
 * STRATA_DEVICE=emulated). Prints "collectives_check rank R: N checks, F failed"; exit 0
 * when none failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum coll { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, BCAST, REDUCE, ALL_TO_ALL, GATHER, SCATTER, RING, NCOLL };
static const char* coll_names[NCOLL] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast",
                                        "ncclBcast",     "ncclReduce",        "ncclAlltoAll",  "ncclGather",
                                        "ncclScatter",   "ncclSend/ncclRecv ring"};
static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static const char* op_names[] = {"sum", "prod", "max", "min", "avg"};
static const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                       ncclUint64,  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
enum { COUNT = 257 };

/* What rank r contributes at element i: 1, 2 or 3, so every sum and product of up to four
 * ranks is exact in every type (81 at most). */
static double input(int r, size_t i) { return (double)(1 + (r + 2 * i) % 3); }

static double reduce_ref(ncclRedOp_t op, size_t i, int n) {
  double acc = input(0, i);
  int r;
  for (r = 1; r < n; ++r) {
    const double x = input(r, i);
    if (op == ncclSum || op == ncclAvg) acc += x;
    else if (op == ncclProd) acc *= x;
    else if (op == ncclMax) acc = x > acc ? x : acc;
    else acc = x < acc ? x : acc;
  }
  return acc;
}

static int integer(ncclDataType_t t) { return t <= ncclUint64; }

static double finish(ncclRedOp_t op, double v, ncclDataType_t t, int n) {
  if (op != ncclAvg) return v;
  return integer(t) ? (double)((long long)v / n) : v / n; /* integer averages truncate */
}

static int reduces(enum coll c) { return c == ALL_REDUCE || c == REDUCE_SCATTER || c == REDUCE; }
static int rooted(enum coll c) { return c == BROADCAST || c == BCAST || c == REDUCE || c == GATHER || c == SCATTER; }

/* Where a pointer into one of the host staging buffers lies in its copy the call gets. */
static void* mirror(const void* p, const char* host, char* copy, size_t bytes) {
  const char* c = (const char*)p;
  return c >= host && c < host + bytes ? copy + (c - host) : NULL;
}

/* One call, checked: fills this rank's input (in host staging buffers, then copied to the
 * buffers the call gets), runs it, compares every element it wrote. */
static void run_case(ncclComm_t comm, enum coll c, ncclDataType_t t, ncclRedOp_t op, int root, int in_place) {
  const int n = g_size, me = g_rank;
  const size_t es = harness_size(t), big = (size_t)n * COUNT;
  char* sendbuf = calloc(big, es);
  char* recvbuf = calloc(big, es);
  char* dsend = harness_alloc(big * es);
  char* drecv = harness_alloc(big * es);
  const void* send = sendbuf;
  void* recv = recvbuf;
  void* s;
  cudaStream_t stream = harness_stream();
  size_t i, bad = (size_t)-1;
  double got = 0, want = 0;
  ncclResult_t r = ncclSuccess;
  char what[256];
  int rr;

  switch (c) { /* this rank's input, and in place where the collective has that form */
    case ALL_REDUCE: case BROADCAST: case BCAST: case REDUCE:
      for (i = 0; i < COUNT; ++i) /* a non-root's broadcast buffer holds 7 until the root's data arrive */
        harness_put(sendbuf, t, i, c == BROADCAST || c == BCAST ? (me == root ? input(root, i) : 7) : input(me, i));
      if (in_place || c == BCAST) { memcpy(recvbuf, sendbuf, COUNT * es); send = recv; }
      break;
    case REDUCE_SCATTER: case ALL_TO_ALL:
      for (i = 0; i < big; ++i) harness_put(sendbuf, t, i, input(me, i));
      if (in_place) { memcpy(recvbuf, sendbuf, big * es); send = recv; }
      if (in_place && c == REDUCE_SCATTER) recv = recvbuf + (size_t)me * COUNT * es;
      break;
    case ALL_GATHER: case GATHER:
      for (i = 0; i < COUNT; ++i) harness_put(sendbuf, t, i, input(me, i));
      if (in_place) { memcpy(recvbuf + (size_t)me * COUNT * es, sendbuf, COUNT * es); send = recvbuf + (size_t)me * COUNT * es; }
      break;
    case SCATTER: case RING:
      for (i = 0; i < big; ++i) harness_put(sendbuf, t, i, input(c == SCATTER ? root : me, i));
      break;
    default: break;
  }
  harness_upload(dsend, sendbuf, big * es);
  harness_upload(drecv, recvbuf, big * es);
  s = mirror(send, sendbuf, dsend, big * es);
  if (!s) s = mirror(send, recvbuf, drecv, big * es);
  recv = mirror(recv, recvbuf, drecv, big * es);
  switch (c) {
    case ALL_REDUCE: r = ncclAllReduce(s, recv, COUNT, t, op, comm, stream); break;
    case REDUCE_SCATTER: r = ncclReduceScatter(s, recv, COUNT, t, op, comm, stream); break;
    case ALL_GATHER: r = ncclAllGather(s, recv, COUNT, t, comm, stream); break;
    case BROADCAST: r = ncclBroadcast(s, recv, COUNT, t, root, comm, stream); break;
    case BCAST: r = ncclBcast(recv, COUNT, t, root, comm, stream); break;
    case REDUCE: r = ncclReduce(s, recv, COUNT, t, op, root, comm, stream); break;
    case ALL_TO_ALL: r = ncclAlltoAll(s, recv, COUNT, t, comm, stream); break;
    case GATHER: r = ncclGather(s, recv, COUNT, t, root, comm, stream); break;
    case SCATTER: r = ncclScatter(s, recv, COUNT, t, root, comm, stream); break;
    case RING:
      MUST(ncclGroupStart());
      MUST(ncclSend(s, COUNT, t, (me + 1) % n, comm, stream));
      MUST(ncclRecv(recv, COUNT, t, (me + n - 1) % n, comm, stream));
      r = ncclGroupEnd();
      break;
    default: break;
  }
  harness_download(recvbuf, drecv, big * es); /* queued after the call on its stream: no other wait */
  snprintf(what, sizeof what, "%s %s %s root %d %s", coll_names[c], harness_type_name(t),
           reduces(c) ? op_names[op] : "-", rooted(c) ? root : -1, in_place ? "in place" : "out of place");
  CHECK_RESULT(r, ncclSuccess);
  /* Every element this rank should hold, against the serial computation. */
  recv = recvbuf;
  switch (c) {
    case ALL_REDUCE: case REDUCE:
      if (c == REDUCE && me != root) break; /* a non-root's receive buffer is not NCCL's to write */
      for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
        want = finish(op, reduce_ref(op, i, n), t, n), got = harness_get(recv, t, i);
        if (!harness_equal(got, want, t, op == ncclAvg)) bad = i;
      }
      break;
    case REDUCE_SCATTER:
      for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
        want = finish(op, reduce_ref(op, (size_t)me * COUNT + i, n), t, n);
        got = harness_get(in_place ? recvbuf + (size_t)me * COUNT * es : recvbuf, t, i);
        if (!harness_equal(got, want, t, op == ncclAvg)) bad = i;
      }
      break;
    case BROADCAST: case BCAST: case SCATTER:
      for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
        want = input(root, c == SCATTER ? (size_t)me * COUNT + i : i), got = harness_get(recv, t, i);
        if (got != want) bad = i;
      }
      break;
    case ALL_GATHER: case GATHER:
      if (c == GATHER && me != root) break;
      for (rr = 0; rr < n; ++rr)
        for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
          want = input(rr, i), got = harness_get(recv, t, (size_t)rr * COUNT + i);
          if (got != want) bad = (size_t)rr * COUNT + i;
        }
      break;
    case ALL_TO_ALL: /* block rr came from rank rr, which sent its block `me` */
      for (rr = 0; rr < n; ++rr)
        for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
          want = input(rr, (size_t)me * COUNT + i), got = harness_get(recv, t, (size_t)rr * COUNT + i);
          if (got != want) bad = (size_t)rr * COUNT + i;
        }
      break;
    case RING:
      for (i = 0; i < COUNT && bad == (size_t)-1; ++i) {
        want = input((me + n - 1) % n, i), got = harness_get(recv, t, i);
        if (got != want) bad = i;
      }
      break;
    default: break;
  }
  if (bad != (size_t)-1) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s: element %zu is %.9g, expected %.9g", what, bad, got, want);
    CHECK(0, msg);
  } else {
    CHECK(1, what);
  }
  free(sendbuf);
  free(recvbuf);
  harness_free(dsend);
  harness_free(drecv);
}

int main(int argc, char** argv) {
  ncclComm_t comm;
  size_t ti, oi;
  int c, in_place;
  float x = 1;
  if (argc != 2) {
    fprintf(stderr, "usage: collectives_check ID_FILE (under strata-run or mpirun)\n");
    return 2;
  }
  comm = harness_world(argv[1]);
  for (ti = 0; ti < sizeof types / sizeof types[0]; ++ti) {
    const int root = (int)ti % g_size; /* every rank is a root for some types */
    for (c = 0; c < NCOLL; ++c)
      for (in_place = 0; in_place < 2; ++in_place) {
        if (in_place && (c == BCAST || c == SCATTER || c == RING)) continue; /* no in-place form */
        if (reduces((enum coll)c))
          for (oi = 0; oi < sizeof ops / sizeof ops[0]; ++oi) run_case(comm, (enum coll)c, types[ti], ops[oi], root, in_place);
        else
          run_case(comm, (enum coll)c, types[ti], ncclSum, root, in_place);
      }
  }
  /* Nothing to move: succeeds and touches nothing (the buffers may be NULL). */
  CHECK_RESULT(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  CHECK_RESULT(ncclAllReduce(&x, &x, 0, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
  CHECK(x == 1, "a count-0 all-reduce left its buffer alone");
  MUST(ncclCommDestroy(comm));
  printf("collectives_check: %s buffers\n", harness_memory());
  return harness_report("collectives_check");
}
