/* Strata's C API. Every call returns a strataResult_t; on failure
 * strataGetLastError() returns a message naming the cause (thread-local).
 * A collective's last argument, `request`, may be NULL for a blocking call; otherwise
 * the call returns at once and *request must be passed to strataWait/strataTest. */
#ifndef STRATA_H_
#define STRATA_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ these enums have int as their underlying type: a C caller may pass any int, and
 * C++ makes merely reading a value outside an enum's range without one undefined (UBSan
 * caught the library doing so while refusing strataDataType_t 42). C sees no change. */
#ifdef __cplusplus
#define STRATA_C_ENUM enum : int
#else
#define STRATA_C_ENUM enum
#endif

typedef STRATA_C_ENUM {
  strataSuccess = 0,
  strataInvalidArgument = 1,
  strataInvalidUsage = 2,
  strataRemoteError = 3,
  strataTimeout = 4,
  strataSystemError = 5,
  strataInternalError = 6,
  strataInProgress = 7 /* strataTest: not finished yet */
} strataResult_t;

typedef STRATA_C_ENUM {
  strataInt8 = 0,
  strataUint8 = 1,
  strataInt32 = 2,
  strataUint32 = 3,
  strataInt64 = 4,
  strataUint64 = 5,
  strataFloat16 = 6,
  strataBfloat16 = 7,
  strataFloat32 = 8,
  strataFloat64 = 9,
  strataFloat8e4m3 = 10, /* OCP fp8 e4m3 (largest 448, no infinity) */
  strataFloat8e5m2 = 11  /* OCP fp8 e5m2 (largest 57344) */
} strataDataType_t;

typedef STRATA_C_ENUM { strataSum = 0, strataProd = 1, strataMax = 2, strataMin = 3, strataAvg = 4 } strataRedOp_t;

#define STRATA_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[STRATA_UNIQUE_ID_BYTES];
} strataUniqueId;

typedef struct strataComm* strataComm_t;
typedef struct strataRequest* strataRequest_t;

#define STRATA_SPLIT_NOCOLOR (-1)

const char* strataGetErrorString(strataResult_t result);
const char* strataGetLastError(void);

strataResult_t strataGetUniqueId(strataUniqueId* id);
strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId id, int rank);
strataResult_t strataCommInitFromEnv(strataComm_t* comm);
/* color == STRATA_SPLIT_NOCOLOR gives *newcomm = NULL; any other negative color is
   strataInvalidArgument on every rank (comm stays usable). */
strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm);
/* After a failure: collective over the surviving ranks, which agree on who is alive
   within STRATA_TIMEOUT and get a new communicator of those ranks in their old order
   (strata::Comm::shrink). comm can then only be destroyed. strataRemoteError when this
   rank was left out. */
strataResult_t strataCommShrink(strataComm_t comm, strataComm_t* newcomm);
/* Growing (strata::Comm::open_door, newcomers, grow, join): collective; rank 0 opens a door
   for newcomers at address ("host:port", or NULL/"" for any port on its interface) and every
   rank gets the id a newcomer passes to strataCommJoin. */
strataResult_t strataCommOpenDoor(strataComm_t comm, const char* address, strataUniqueId* id);
/* Collective: how many newcomers wait at the door. */
strataResult_t strataCommNewcomers(strataComm_t comm, int* count);
/* Collective with `count` waiting newcomers: a new communicator of comm's ranks and theirs,
   ordered by key (comm's ranks first on equal keys). comm stays usable. */
strataResult_t strataCommGrow(strataComm_t comm, int count, int key, strataComm_t* newcomm);
/* A newcomer: waits at the door of id until a grow takes it in. */
strataResult_t strataCommJoin(strataUniqueId id, int key, strataComm_t* newcomm);
strataResult_t strataCommDestroy(strataComm_t comm);
strataResult_t strataCommAbort(strataComm_t comm);
strataResult_t strataCommRank(strataComm_t comm, int* rank);
strataResult_t strataCommCount(strataComm_t comm, int* count);

strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                               strataRequest_t* request);
strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                   strataRequest_t* request);
strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm,
                               strataRequest_t* request);
strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm,
                               strataRequest_t* request);
strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root,
                            strataComm_t comm, strataRequest_t* request);
strataResult_t strataAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              strataDataType_t datatype, strataComm_t comm,
                              strataRequest_t* request);
strataResult_t strataBarrier(strataComm_t comm, strataRequest_t* request);
strataResult_t strataSend(const void* buff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataRequest_t* request);
strataResult_t strataRecv(void* buff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataRequest_t* request);
strataResult_t strataGroupStart(strataComm_t comm);
strataResult_t strataGroupEnd(strataComm_t comm, strataRequest_t* request);

/* ---- The same calls on device buffers, ordered on a stream as NCCL's are (C++: the
 * strata::Comm overloads with a strata::device::Stream; docs/api.md). Each returns at once:
 * the operation runs after the work already queued on `stream` (a cudaStream_t on the CUDA
 * backend; NULL: the default stream), and work queued on it afterwards waits for it. The
 * buffers must be device memory (strataInvalidArgument for host memory, a freed buffer, or
 * both kinds in one call; refused on every rank like a null buffer). A send or receive
 * inside strataGroupStart/strataGroupEnd is recorded with its stream; strataGroupEnd with a
 * request returns at once (NULL: it waits for the group to be over). An operation that
 * fails after its call returned still releases its stream; the next call on the
 * communicator returns its error, as does strataCommGetAsyncError. ---- */
typedef void* strataStream_t;
strataResult_t strataAllReduceOnStream(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                       strataRedOp_t op, strataComm_t comm, strataStream_t stream);
strataResult_t strataReduceScatterOnStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                           strataStream_t stream);
strataResult_t strataAllGatherOnStream(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       strataDataType_t datatype, strataComm_t comm, strataStream_t stream);
strataResult_t strataBroadcastOnStream(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                       int root, strataComm_t comm, strataStream_t stream);
strataResult_t strataReduceOnStream(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                    strataRedOp_t op, int root, strataComm_t comm, strataStream_t stream);
strataResult_t strataAllToAllOnStream(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                                      strataComm_t comm, strataStream_t stream);
strataResult_t strataBarrierOnStream(strataComm_t comm, strataStream_t stream);
strataResult_t strataSendOnStream(const void* buff, size_t count, strataDataType_t datatype, int peer,
                                  strataComm_t comm, strataStream_t stream);
strataResult_t strataRecvOnStream(void* buff, size_t count, strataDataType_t datatype, int peer, strataComm_t comm,
                                  strataStream_t stream);
/* *asyncError: strataSuccess, or the code of the first device operation that failed after
 * its call returned (then strataGetLastError() gives its message). */
strataResult_t strataCommGetAsyncError(strataComm_t comm, strataResult_t* asyncError);

/* Device memory from the device backend (STRATA_DEVICE; C++: strata::alloc, strata/device.hpp),
 * as ncclMemAlloc/ncclMemFree. 0 bytes gives *ptr = NULL. strataInvalidUsage when no
 * device backend is available; strataInvalidArgument when strataMemFree is given a pointer
 * strataMemAlloc did not return (NULL: nothing to free). */
strataResult_t strataMemAlloc(void** ptr, size_t size);
/* Host memory that the other ranks of the node can map (C++: strata::alloc(size,
 * MemoryKind::host)): collectives on it read peers' buffers directly (zero-copy). Works
 * without a device backend. strataMemFree frees both kinds. */
strataResult_t strataMemAllocHost(void** ptr, size_t size);
strataResult_t strataMemFree(void* ptr);

/* As ncclCommRegister/ncclCommDeregister: makes [buff, buff + size) of host memory
 * shareable with the node's other ranks (C++: Comm::register_buffer, which says what can
 * be registered); *handle is for strataCommDeregister. strataInvalidArgument for private
 * memory (malloc), a null or empty range, or a handle that is not a live one of comm. */
strataResult_t strataCommRegister(strataComm_t comm, void* buff, size_t size, void** handle);
strataResult_t strataCommDeregister(strataComm_t comm, void* handle);

/* Both release the request once it has completed (successfully or not). strataTest
 * returns strataInProgress while the operation runs. */
strataResult_t strataWait(strataRequest_t request);
strataResult_t strataTest(strataRequest_t request);

/* ---- DiLoCo outer synchronisation across islands (C++: strata/outer_sync.hpp, which
 * describes the algorithm; docs/api.md). ---- */
typedef enum { strataWireFp32 = 0, strataWireBf16 = 1, strataWireInt8 = 2, strataWireFp4 = 3 } strataWireFormat_t;

typedef struct {
  float lr;                  /* outer learning rate */
  float momentum;            /* 0: no momentum */
  int nesterov;              /* 0: heavy-ball momentum */
  strataWireFormat_t format; /* on the wire between islands */
  int islands;               /* 0: the groups of the hierarchy's outermost level; K: K islands of consecutive ranks */
  int every;                 /* H: inner steps between two syncs of a fragment (strataOuterSyncStep) */
  int fragments;             /* F */
  int overlap;               /* tau: inner steps between a fragment's exchange and its application */
  float mix;                 /* alpha: weight of the local values when a fragment is applied */
} strataOuterSyncConfig_t;

typedef struct {
  unsigned long long exchanges;  /* fragment exchanges completed */
  unsigned long long bytes_sent; /* bytes this rank sent to other islands */
  double exposed_seconds;        /* time spent waiting for exchanges */
} strataOuterSyncStats_t;

typedef struct strataOuterSync* strataOuterSync_t;

/* The defaults: lr 0.7, momentum 0.9, Nesterov, fp32, islands from the hierarchy, H 1, F 1, tau 0, mix 0. */
strataResult_t strataOuterSyncConfigInit(strataOuterSyncConfig_t* config);
/* Collective over comm. segments (nsegments lengths summing to count) may be NULL. */
strataResult_t strataOuterSyncCreate(strataComm_t comm, float* params, size_t count,
                                     const strataOuterSyncConfig_t* config, const size_t* segments,
                                     size_t nsegments, strataOuterSync_t* sync);
strataResult_t strataOuterSyncStep(strataOuterSync_t sync);   /* after each inner step */
strataResult_t strataOuterSyncNow(strataOuterSync_t sync);    /* every fragment now, blocking */
strataResult_t strataOuterSyncFinish(strataOuterSync_t sync); /* apply what is pending */
strataResult_t strataOuterSyncGetStats(strataOuterSync_t sync, strataOuterSyncStats_t* stats);
/* count floats each; collective over the island. */
strataResult_t strataOuterSyncSaveState(strataOuterSync_t sync, float* snapshot, float* momentum, long long* steps);
strataResult_t strataOuterSyncLoadState(strataOuterSync_t sync, const float* snapshot, const float* momentum,
                                        long long steps);
strataResult_t strataOuterSyncDestroy(strataOuterSync_t sync);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_H_ */
