/* What both NCCL test programs (collectives_check.c, semantics_check.cpp) share: this
 * process's rank from its launcher (strata-run or mpirun), the world communicator made
 * the NCCL way (rank 0's unique id passed through a file), checks that count failures,
 * and element access for every NCCL type. C99, compiled against whichever nccl.h the
 * build chose (NVIDIA's where installed). */
#ifndef STRATA_NCCL_TEST_HARNESS_H_
#define STRATA_NCCL_TEST_HARNESS_H_

#include <nccl.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int g_rank, g_size, g_checks, g_failed;

/* Rank and size from STRATA_RANK/STRATA_WORLD_SIZE or OMPI_COMM_WORLD_RANK/SIZE; then the
 * world communicator over them, its id through `id_file` (rank 0 writes it). Exits 2 when
 * the job cannot start. */
ncclComm_t harness_world(const char* id_file);
/* The same id exchange, for a test that makes the world communicator itself. */
ncclUniqueId harness_world_id(const char* id_file);
void harness_rank_from_env(void);

/* Counts a check; prints what failed (with the library's last error). */
void harness_check(int ok, const char* what, const char* file, int line);
#define CHECK(cond, what) harness_check((cond) != 0, (what), __FILE__, __LINE__)
/* A call that must return `want`. */
#define CHECK_RESULT(call, want)                                                     \
  do {                                                                               \
    ncclResult_t got_ = (call);                                                      \
    harness_check_result(got_, (want), #call, __FILE__, __LINE__);                   \
  } while (0)
void harness_check_result(ncclResult_t got, ncclResult_t want, const char* call, const char* file, int line);
/* A call that must succeed, or the program cannot go on. */
#define MUST(call) harness_must((call), #call, __FILE__, __LINE__)
void harness_must(ncclResult_t got, const char* call, const char* file, int line);

/* "<program> rank R: N checks, F failed"; returns the exit status (0 when none failed). */
int harness_report(const char* program);

/* Element i of a buffer of `type` as a double, and back (put: values every type holds
 * exactly, such as small integers). Element size in bytes. */
size_t harness_size(ncclDataType_t type);
double harness_get(const void* buf, ncclDataType_t type, size_t i);
void harness_put(void* buf, ncclDataType_t type, size_t i, double v);
/* Whether `got` is `want` in `type`: exactly, or within the type's rounding of one
 * division when `rounded` (an average). */
int harness_equal(double got, double want, ncclDataType_t type, int rounded);
const char* harness_type_name(ncclDataType_t type);

double harness_now(void); /* seconds, monotonic */

/* The buffers calls are given: host memory; or, built with HARNESS_CUDA (the target
 * collectives_check_cuda, which tests/nccl/gpu_checks.sh runs), CUDA device memory on the
 * current device; or, built with HARNESS_STRATA_DEVICE (harness_device.cpp: the targets
 * collectives_check_device and device_check), ncclMemAlloc's device memory on Strata's
 * device layer (STRATA_DEVICE=emulated in the tests). Device buffers are filled and read
 * through copies, the calls ordered on harness_stream(); harness_download queues its copy
 * on that stream and waits for it alone. */
void* harness_alloc(size_t bytes); /* zeroed */
void harness_free(void* p);
void harness_upload(void* dst, const void* host, size_t bytes);
void harness_download(void* host, const void* src, size_t bytes);
cudaStream_t harness_stream(void);
void harness_sync(void); /* until the stream's work is done */
const char* harness_memory(void); /* "host" or "cuda" */

#ifdef __cplusplus
}
#endif

#endif
