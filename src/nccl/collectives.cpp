// The collective and point-to-point entry points: each builds its NcclCall; `submit`
// checks it, then records it (inside a group) or runs it (call.hpp says how).
#include "call.hpp"
#include "entry.hpp"
#include "errors.hpp"
#include "group.hpp"

using namespace strata_nccl;

namespace {

ncclResult_t submit(const NcclCall& call, ncclComm_t comm) {
  return guarded(call.fn, [&] {
    auto state = lookup(comm);
    check(call, *state);
    if (in_group()) defer_call(std::move(state), call);
    else run_now(*state, call);
    return ncclSuccess;
  });
}

}  // namespace

extern "C" {

ncclResult_t pncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclAllReduce", NcclOp::all_reduce, send, recv, count, type, op, 0, stream}, comm);
}

ncclResult_t pncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                                ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclReduceScatter", NcclOp::reduce_scatter, send, recv, recvcount, type, op, 0, stream}, comm);
}

ncclResult_t pncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                            cudaStream_t stream) {
  return submit({"ncclAllGather", NcclOp::all_gather, send, recv, sendcount, type, ncclSum, 0, stream}, comm);
}

ncclResult_t pncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclBroadcast", NcclOp::broadcast, send, recv, count, type, ncclSum, root, stream}, comm);
}

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return submit({"ncclBcast", NcclOp::broadcast, buff, buff, count, type, ncclSum, root, stream}, comm);
}

ncclResult_t pncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclReduce", NcclOp::reduce, send, recv, count, type, op, root, stream}, comm);
}

ncclResult_t pncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit({"ncclAlltoAll", NcclOp::all_to_all, send, recv, count, type, ncclSum, 0, stream}, comm);
}

ncclResult_t pncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  return submit({"ncclGather", NcclOp::gather, send, recv, count, type, ncclSum, root, stream}, comm);
}

ncclResult_t pncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                          cudaStream_t stream) {
  return submit({"ncclScatter", NcclOp::scatter, send, recv, count, type, ncclSum, root, stream}, comm);
}

ncclResult_t pncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return submit({"ncclSend", NcclOp::send, send, nullptr, count, type, ncclSum, peer, stream}, comm);
}

ncclResult_t pncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return submit({"ncclRecv", NcclOp::recv, nullptr, recv, count, type, ncclSum, peer, stream}, comm);
}

}  // extern "C"

STRATA_NCCL_ALIAS(ncclAllReduce)
STRATA_NCCL_ALIAS(ncclReduceScatter)
STRATA_NCCL_ALIAS(ncclAllGather)
STRATA_NCCL_ALIAS(ncclBroadcast)
STRATA_NCCL_ALIAS(ncclBcast)
STRATA_NCCL_ALIAS(ncclReduce)
STRATA_NCCL_ALIAS(ncclAlltoAll)
STRATA_NCCL_ALIAS(ncclGather)
STRATA_NCCL_ALIAS(ncclScatter)
STRATA_NCCL_ALIAS(ncclSend)
STRATA_NCCL_ALIAS(ncclRecv)
