// The functions of NVIDIA's libnccl.so.2 that Strata does not implement (docs/nccl.md
// lists them): each fails with ncclInvalidUsage and a last error naming it. Also the host
// side of NCCL's device API (nccl_device.h), which needs GPU kernels built against NCCL:
// its team queries answer for the host path, where no peer's memory is load/store
// reachable (the LSA team is this rank alone).
#include <string>

#include "comm.hpp"
#include "entry.hpp"
#include "errors.hpp"

using namespace strata_nccl;

// nccl_device.h's host declarations; its structs are opaque here except the team (three ints).
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

extern "C" {
ncclResult_t ncclDevCommCreate(ncclComm_t, const void* reqs, void* out_dev_comm);
ncclResult_t pncclDevCommCreate(ncclComm_t, const void* reqs, void* out_dev_comm);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void* dev_comm);
ncclResult_t pncclDevCommDestroy(ncclComm_t, const void* dev_comm);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int n, void* out_handle, void* out_req);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int n, void* out_handle, void* out_req);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t, int n, void* out_handle, void* out_req);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int n, void* out_handle, void* out_req);
ncclResult_t ncclLLA2ACreateRequirement(int blocks, int slots, void* out_handle, void* out_req);
ncclResult_t pncclLLA2ACreateRequirement(int blocks, int slots, void* out_handle, void* out_req);
int ncclLLA2ACalcSlots(int max_elts, int max_elt_size);
int pncclLLA2ACalcSlots(int max_elts, int max_elt_size);
ncclTeam_t ncclTeamWorld(ncclComm_t);
ncclTeam_t pncclTeamWorld(ncclComm_t);
ncclTeam_t ncclTeamLsa(ncclComm_t);
ncclTeam_t pncclTeamLsa(ncclComm_t);
ncclTeam_t ncclTeamRail(ncclComm_t);
ncclTeam_t pncclTeamRail(ncclComm_t);
int ncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int rank);
int pncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int rank);
int ncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int rank);
int pncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int rank);
void ncclResetDebugInitInternal(void);
}

namespace {

ncclResult_t not_implemented(const char* fn, const char* why) {
  return fail(fn, ncclInvalidUsage, std::string("not implemented by Strata's libnccl.so.2: ") + why +
                                        " (docs/nccl.md lists what is)");
}

constexpr const char* kDeviceApi = "NCCL's device API needs GPU kernels built against NVIDIA's NCCL";

// This rank and size in `comm`; false (and the last error) for one that is not live.
bool rank_of(const char* fn, ncclComm_t comm, int& rank, int& size) {
  const ncclResult_t r = guarded(fn, [&] {
    const strata::Comm c = lookup(comm)->use();
    rank = c.rank();
    size = c.size();
    return ncclSuccess;
  });
  return r == ncclSuccess;
}

ncclTeam_t team(const char* fn, ncclComm_t comm, bool lsa) {
  int rank = 0, size = 0;
  if (!rank_of(fn, comm, rank, size)) return {0, 0, 0};
  return lsa ? ncclTeam_t{1, 0, 1} : ncclTeam_t{size, rank, 1};
}

}  // namespace

extern "C" {

ncclResult_t pncclCommRevoke(ncclComm_t, int) {
  return not_implemented("ncclCommRevoke", "use ncclCommAbort, or ncclCommShrink after a failure");
}
ncclResult_t pncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int) {
  return not_implemented("ncclCommWindowRegister", "symmetric memory windows are for NCCL's GPU kernels");
}
ncclResult_t pncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return not_implemented("ncclCommWindowDeregister", "symmetric memory windows are for NCCL's GPU kernels");
}
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t*) {
  return not_implemented("ncclGroupSimulateEnd", "strata-sim models Strata's plans instead");
}
ncclResult_t pncclDevCommCreate(ncclComm_t, const void*, void*) { return not_implemented("ncclDevCommCreate", kDeviceApi); }
ncclResult_t pncclDevCommDestroy(ncclComm_t, const void*) { return not_implemented("ncclDevCommDestroy", kDeviceApi); }
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, void*, void*) {
  return not_implemented("ncclGinBarrierCreateRequirement", kDeviceApi);
}
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, void*, void*) {
  return not_implemented("ncclLsaBarrierCreateRequirement", kDeviceApi);
}
ncclResult_t pncclLLA2ACreateRequirement(int, int, void*, void*) {
  return not_implemented("ncclLLA2ACreateRequirement", kDeviceApi);
}
int pncclLLA2ACalcSlots(int, int) {
  not_implemented("ncclLLA2ACalcSlots", kDeviceApi);
  return 0;
}

// nccl_device.h's formulas, with this rank's LSA team of one.
ncclTeam_t pncclTeamWorld(ncclComm_t comm) { return team("ncclTeamWorld", comm, false); }
ncclTeam_t pncclTeamLsa(ncclComm_t comm) { return team("ncclTeamLsa", comm, true); }
ncclTeam_t pncclTeamRail(ncclComm_t comm) { return team("ncclTeamRail", comm, false); }
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t t, int r) {
  int rank = 0, size = 0;
  if (!rank_of("ncclTeamRankToWorld", comm, rank, size)) return -1;
  return rank + (r - t.rank) * t.stride;
}
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t t, int r) {
  int rank = 0, size = 0;
  if (!rank_of("ncclTeamRankToLsa", comm, rank, size)) return -1;
  return (r - t.rank) * t.stride;  // this rank is LSA rank 0
}

void pncclResetDebugInitInternal(void) {}

}  // extern "C"

STRATA_NCCL_ALIAS(ncclCommRevoke)
STRATA_NCCL_ALIAS(ncclCommWindowRegister)
STRATA_NCCL_ALIAS(ncclCommWindowDeregister)
STRATA_NCCL_ALIAS(ncclGroupSimulateEnd)
STRATA_NCCL_ALIAS(ncclDevCommCreate)
STRATA_NCCL_ALIAS(ncclDevCommDestroy)
STRATA_NCCL_ALIAS(ncclGinBarrierCreateRequirement)
STRATA_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)
STRATA_NCCL_ALIAS(ncclLLA2ACreateRequirement)
STRATA_NCCL_ALIAS(ncclLLA2ACalcSlots)
STRATA_NCCL_ALIAS(ncclTeamWorld)
STRATA_NCCL_ALIAS(ncclTeamLsa)
STRATA_NCCL_ALIAS(ncclTeamRail)
STRATA_NCCL_ALIAS(ncclTeamRankToWorld)
STRATA_NCCL_ALIAS(ncclTeamRankToLsa)
STRATA_NCCL_ALIAS(ncclResetDebugInitInternal)
