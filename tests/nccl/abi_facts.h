/* NCCL's ABI as facts, listed once. abi_nvidia.c records them after NVIDIA's nccl.h,
 * abi_ours.c after Strata's include/nccl/nccl.h, both with abi_table.h; abi_check
 * compares the two tables entry by entry. FACT(expr) is an integer; FACT_PTR(expr) a
 * pointer (compared as an integer). */
#ifndef STRATA_NCCL_ABI_FACTS_H_
#define STRATA_NCCL_ABI_FACTS_H_

#define NCCL_ABI_FACTS(FACT, FACT_PTR)                                                                         \
  /* ncclResult_t */                                                                                           \
  FACT(ncclSuccess) FACT(ncclUnhandledCudaError) FACT(ncclSystemError) FACT(ncclInternalError)                 \
  FACT(ncclInvalidArgument) FACT(ncclInvalidUsage) FACT(ncclRemoteError) FACT(ncclInProgress)                  \
  FACT(ncclNumResults) FACT(sizeof(ncclResult_t))                                                              \
  /* ncclRedOp_t */                                                                                            \
  FACT(ncclSum) FACT(ncclProd) FACT(ncclMax) FACT(ncclMin) FACT(ncclAvg) FACT(ncclNumOps) FACT(ncclMaxRedOp)   \
  FACT(ncclNumOps_dummy) FACT(sizeof(ncclRedOp_t)) FACT(sizeof(ncclRedOp_dummy_t))                             \
  /* ncclDataType_t, aliases included */                                                                       \
  FACT(ncclInt8) FACT(ncclChar) FACT(ncclUint8) FACT(ncclInt32) FACT(ncclInt) FACT(ncclUint32) FACT(ncclInt64) \
  FACT(ncclUint64) FACT(ncclFloat16) FACT(ncclHalf) FACT(ncclFloat32) FACT(ncclFloat) FACT(ncclFloat64)        \
  FACT(ncclDouble) FACT(ncclBfloat16) FACT(ncclFloat8e4m3) FACT(ncclFloat8e5m2) FACT(ncclNumTypes)             \
  FACT(sizeof(ncclDataType_t))                                                                                 \
  FACT(ncclScalarDevice) FACT(ncclScalarHostImmediate) FACT(sizeof(ncclScalarResidence_t))                     \
  /* handles and the unique id */                                                                              \
  FACT(sizeof(ncclComm_t)) FACT(sizeof(ncclWindow_t)) FACT(sizeof(cudaStream_t)) FACT(NCCL_UNIQUE_ID_BYTES)    \
  FACT(sizeof(ncclUniqueId)) FACT(offsetof(ncclUniqueId, internal))                                            \
  /* versions and constants */                                                                                 \
  FACT(NCCL_MAJOR) FACT(NCCL_MINOR) FACT(NCCL_PATCH) FACT(NCCL_VERSION_CODE) FACT(NCCL_VERSION(2, 8, 4))       \
  FACT(NCCL_VERSION(2, 28, 9)) FACT(NCCL_CONFIG_UNDEF_INT) FACT(NCCL_SPLIT_NOCOLOR) FACT(NCCL_UNDEF_FLOAT)     \
  FACT(NCCL_WIN_DEFAULT) FACT(NCCL_WIN_COLL_SYMMETRIC) FACT(NCCL_WIN_REQUIRED_ALIGNMENT)                       \
  FACT(NCCL_CTA_POLICY_DEFAULT) FACT(NCCL_CTA_POLICY_EFFICIENCY) FACT(NCCL_CTA_POLICY_ZERO)                    \
  FACT(NCCL_SHRINK_DEFAULT) FACT(NCCL_SHRINK_ABORT) FACT(NCCL_REVOKE_DEFAULT)                                  \
  /* ncclConfig_t: layout, then NCCL_CONFIG_INITIALIZER's values */                                            \
  FACT(sizeof(ncclConfig_t)) FACT(offsetof(ncclConfig_t, size)) FACT(offsetof(ncclConfig_t, magic))            \
  FACT(offsetof(ncclConfig_t, version)) FACT(offsetof(ncclConfig_t, blocking))                                 \
  FACT(offsetof(ncclConfig_t, cgaClusterSize)) FACT(offsetof(ncclConfig_t, minCTAs))                           \
  FACT(offsetof(ncclConfig_t, maxCTAs)) FACT(offsetof(ncclConfig_t, netName))                                  \
  FACT(offsetof(ncclConfig_t, splitShare)) FACT(offsetof(ncclConfig_t, trafficClass))                          \
  FACT(offsetof(ncclConfig_t, commName)) FACT(offsetof(ncclConfig_t, collnetEnable))                           \
  FACT(offsetof(ncclConfig_t, CTAPolicy)) FACT(offsetof(ncclConfig_t, shrinkShare))                            \
  FACT(offsetof(ncclConfig_t, nvlsCTAs)) FACT(offsetof(ncclConfig_t, nChannelsPerNetPeer))                     \
  FACT(offsetof(ncclConfig_t, nvlinkCentricSched))                                                             \
  FACT(config.size) FACT(config.magic) FACT(config.version) FACT(config.blocking) FACT(config.cgaClusterSize)  \
  FACT(config.minCTAs) FACT(config.maxCTAs) FACT_PTR(config.netName) FACT(config.splitShare)                   \
  FACT(config.trafficClass) FACT_PTR(config.commName) FACT(config.collnetEnable) FACT(config.CTAPolicy)        \
  FACT(config.shrinkShare) FACT(config.nvlsCTAs) FACT(config.nChannelsPerNetPeer)                              \
  FACT(config.nvlinkCentricSched)                                                                              \
  /* ncclSimInfo_t */                                                                                          \
  FACT(sizeof(ncclSimInfo_t)) FACT(offsetof(ncclSimInfo_t, size)) FACT(offsetof(ncclSimInfo_t, magic))         \
  FACT(offsetof(ncclSimInfo_t, version)) FACT(offsetof(ncclSimInfo_t, estimatedTime)) FACT(sim.size)           \
  FACT(sim.magic) FACT(sim.version) FACT(sim.estimatedTime)

struct abi_fact {
  const char* name;
  long long value;
};
enum { ABI_MAX_FACTS = 256 };

#endif
