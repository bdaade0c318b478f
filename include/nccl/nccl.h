/* NCCL's C interface as Strata's libnccl.so.2 implements it (docs/nccl.md).
 *
 * The enumerations' values and the structs' layouts are NVIDIA's (NCCL 2.28.9's nccl.h;
 * tests/nccl/abi checks them against the installed header), so a program compiled against
 * NVIDIA's header runs on Strata's library unchanged, and one compiled against this
 * header runs on NVIDIA's. This header needs no CUDA headers: a stream is CUDA's opaque
 * `struct CUstream_st*`, declared here when CUDA's headers were not included first.
 *
 * Beyond NCCL: buffers may be host memory (the call then completes before it returns).
 * Every call returns an ncclResult_t; ncclGetLastError() names the cause of a failure. */
#ifndef STRATA_NCCL_H_
#define STRATA_NCCL_H_

#include <limits.h>
#include <stddef.h>

/* The NCCL release whose ABI this is. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
/* Releases up to 2.8 were coded X*1000 + Y*100 + Z, later ones X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifndef __DRIVER_TYPES_H__
/* CUDA's stream handle; the same declaration as CUDA's driver_types.h, which may follow. */
typedef struct CUstream_st* cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ the enumerations get int as their underlying type, so a value outside them that a
 * C caller passes can be read and refused (C++ makes reading it undefined otherwise). Size
 * and calling convention are the same either way. */
#ifdef __cplusplus
#define STRATA_NCCL_ENUM enum : int
#else
#define STRATA_NCCL_ENUM enum
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef STRATA_NCCL_ENUM {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator settings. `size`, `magic` and `version` say which fields the caller's
 * header had: always start from NCCL_CONFIG_INITIALIZER. Strata reads `blocking`; the
 * other fields tune NVIDIA's GPU kernels and are accepted and ignored (docs/nccl.md). */
#define STRATA_NCCL_CONFIG_MAGIC 0xcafebeef
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking; /* 0: creation and split return ncclInProgress; poll ncclCommGetAsyncError */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                                  \
  {                                                                                                              \
    sizeof(ncclConfig_t), STRATA_NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                                             \
  }

/* ncclGroupSimulateEnd's result (not implemented by Strata: ncclInvalidUsage). */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

typedef STRATA_NCCL_ENUM { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef STRATA_NCCL_ENUM {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* the first value ncclRedOpCreatePreMulSum hands out */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef STRATA_NCCL_ENUM {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where ncclRedOpCreatePreMulSum's scalar lives: read at each call, or copied at creation. */
typedef STRATA_NCCL_ENUM { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Every function has a p-prefixed twin (the profiling interface): nccl* are weak aliases. */
#define STRATA_NCCL_DECLARE(ret, name, args) \
  ret name args;                             \
  ret p##name args;

/* ---- memory ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
STRATA_NCCL_DECLARE(ncclResult_t, ncclMemFree, (void* ptr))

/* ---- communicators ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclGetVersion, (int* version))
STRATA_NCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                    (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                     ncclConfig_t* config))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommSplit,
                    (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommShrink,
                    (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                     ncclConfig_t* config, int shrinkFlags))

/* ---- errors ---- */
STRATA_NCCL_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result))
STRATA_NCCL_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm))
STRATA_NCCL_DECLARE(void, ncclResetDebugInit, (void))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))

/* ---- queries ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))

/* ---- registration ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                    (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
STRATA_NCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))

/* ---- reduction operators ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                    (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                     ncclComm_t comm))
STRATA_NCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

/* ---- collectives (count as in docs/api.md: reduce_scatter's is per rank, all_gather's sent) ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     int root, ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclBcast,
                    (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                     cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclBroadcast,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclAllReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclReduceScatter,
                    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclAllGather,
                    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                     ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclAlltoAll,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclGather,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclScatter,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclSend,
                    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream))
STRATA_NCCL_DECLARE(ncclResult_t, ncclRecv,
                    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream))

/* ---- groups ---- */
STRATA_NCCL_DECLARE(ncclResult_t, ncclGroupStart, (void))
STRATA_NCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void))
STRATA_NCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

#undef STRATA_NCCL_DECLARE

#ifdef __cplusplus
}
#endif

#endif /* STRATA_NCCL_H_ */
