// ncclMemAlloc/ncclMemFree and buffer registration. ncclMemAlloc is strata::alloc: device
// memory where a device backend is loaded (STRATA_DEVICE; calls on it go the
// stream-ordered device path), else page-aligned host memory (the host path).
#include <mutex>
#include <string>
#include <unordered_map>

#include "comm.hpp"
#include "entry.hpp"
#include "errors.hpp"
#include "strata/device.hpp"

using namespace strata_nccl;

namespace {

std::mutex allocations_m;
std::unordered_map<void*, size_t>& allocations() {
  static auto* a = new std::unordered_map<void*, size_t>;  // outlives exit-time frees
  return *a;
}

}  // namespace

extern "C" {

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&] {
    if (!ptr) throw strata::InvalidArgument("ptr is NULL");
    if (size == 0) throw strata::InvalidArgument("size is 0");
    void* p = strata::alloc(size, strata::device::available() ? strata::MemoryKind::device : strata::MemoryKind::host);
    std::lock_guard lk(allocations_m);
    allocations().emplace(p, size);
    *ptr = p;
    return ncclSuccess;
  });
}

ncclResult_t pncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&] {
    if (!ptr) return ncclSuccess;
    {
      std::lock_guard lk(allocations_m);
      if (!allocations().erase(ptr))
        throw strata::InvalidArgument("ptr was not returned by ncclMemAlloc (or was freed already)");
    }
    strata::free(ptr);
    return ncclSuccess;
  });
}

ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&] {
    auto state = lookup(comm);
    if (!handle) throw strata::InvalidArgument("handle is NULL");
    if (!buff && size > 0) throw strata::InvalidArgument("buff is NULL");
    *handle = state->add_registration(buff, size);  // host memory needs no registration
    return ncclSuccess;
  });
}

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&] {
    lookup(comm)->remove_registration(handle);
    return ncclSuccess;
  });
}

}  // extern "C"

STRATA_NCCL_ALIAS(ncclMemAlloc)
STRATA_NCCL_ALIAS(ncclMemFree)
STRATA_NCCL_ALIAS(ncclCommRegister)
STRATA_NCCL_ALIAS(ncclCommDeregister)
