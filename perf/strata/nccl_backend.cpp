#include "nccl_backend.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "nccl/nccl.h"
#include "nccl/strata_names.hpp"

namespace perf {

// The functions strata-perf calls, resolved by name from the library loaded.
struct NcclBackend::Api {
  void* lib = nullptr;
  std::string path;
#define STRATA_PERF_NCCL_FUNCTIONS(F)                                                                              \
  F(ncclGetVersion) F(ncclGetUniqueId) F(ncclCommInitRank) F(ncclCommDestroy) F(ncclCommAbort) F(ncclGetErrorString) \
  F(ncclGetLastError) F(ncclAllReduce) F(ncclReduceScatter) F(ncclAllGather) F(ncclBroadcast) F(ncclReduce)          \
  F(ncclAlltoAll) F(ncclSend) F(ncclRecv) F(ncclGroupStart) F(ncclGroupEnd)
#define STRATA_PERF_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  STRATA_PERF_NCCL_FUNCTIONS(STRATA_PERF_NCCL_POINTER)
#undef STRATA_PERF_NCCL_POINTER

  Api() {
    // dlmopen into the base namespace is dlopen, except that sanitizers do not intercept it:
    // their dlopen looks the name up as if called from their runtime, without our run path.
    lib = dlmopen(LM_ID_BASE, "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error(std::string("cannot load libnccl.so.2: ") + dlerror());
#define STRATA_PERF_NCCL_RESOLVE(name)                                                      \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, #name));                              \
  if (!name) throw std::runtime_error("libnccl.so.2 has no " #name);
    STRATA_PERF_NCCL_FUNCTIONS(STRATA_PERF_NCCL_RESOLVE)
#undef STRATA_PERF_NCCL_RESOLVE
    Dl_info info;
    path = dladdr(reinterpret_cast<void*>(ncclAllReduce), &info) && info.dli_fname ? info.dli_fname : "?";
  }
  // Left loaded: NVIDIA's library keeps threads that outlive its communicators.

  // Throws the library's own account of a failure.
  void check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) +
                             ")");
  }
};

namespace {

// NCCL's value whose row resolves to Strata's `v`.
template <typename Nccl, typename T, size_t N>
Nccl nccl_value(const std::array<std::optional<T>, N>& table, T v) {
  for (size_t i = 0; i < N; ++i)
    if (table[i] == v) return static_cast<Nccl>(i);
  throw std::runtime_error(std::string("NCCL has nothing for Strata's ") + strata::name(v));
}
ncclDataType_t nccl_type(DataType t) { return nccl_value<ncclDataType_t>(strata::nccl_names::strata_types(), t); }
ncclRedOp_t nccl_op(ReduceOp op) { return nccl_value<ncclRedOp_t>(strata::nccl_names::strata_ops(), op); }

}  // namespace

NcclBackend::NcclBackend(strata::Comm control) : api_(std::make_unique<Api>()), control_(control) {
  ncclUniqueId id{};
  if (rank() == 0) api_->check(api_->ncclGetUniqueId(&id), "ncclGetUniqueId");
  control.broadcast(&id, &id, sizeof id, DataType::uint8, 0);
  api_->check(api_->ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
  int version = 0;
  api_->check(api_->ncclGetVersion(&version), "ncclGetVersion");
  if (rank() == 0) std::printf("# nccl: %s, ncclGetVersion %d\n", api_->path.c_str(), version);
}

NcclBackend::~NcclBackend() {
  if (!aborted_ && comm_) api_->ncclCommDestroy(comm_);
}

void NcclBackend::run(const CollCall& c) {
  const Api& a = *api_;
  const ncclDataType_t t = nccl_type(c.type);
  if (const P2p* p = std::get_if<P2p>(&c.coll)) {
    const P2pPeers peers = p2p_peers(*p, rank(), size());
    a.check(a.ncclGroupStart(), "ncclGroupStart");
    if (peers.send_to >= 0) a.check(a.ncclSend(c.send, c.count, t, peers.send_to, comm_, nullptr), "ncclSend");
    if (peers.recv_from >= 0) a.check(a.ncclRecv(c.recv, c.count, t, peers.recv_from, comm_, nullptr), "ncclRecv");
    a.check(a.ncclGroupEnd(), "ncclGroupEnd");
    return;
  }
  switch (std::get<Collective>(c.coll)) {
    case Collective::all_reduce:
      a.check(a.ncclAllReduce(c.send, c.recv, c.count, t, nccl_op(c.op), comm_, nullptr), "ncclAllReduce");
      return;
    case Collective::reduce_scatter:
      a.check(a.ncclReduceScatter(c.send, c.recv, c.count, t, nccl_op(c.op), comm_, nullptr), "ncclReduceScatter");
      return;
    case Collective::all_gather:
      a.check(a.ncclAllGather(c.send, c.recv, c.count, t, comm_, nullptr), "ncclAllGather");
      return;
    case Collective::broadcast:
      a.check(a.ncclBroadcast(c.send, c.recv, c.count, t, c.root, comm_, nullptr), "ncclBroadcast");
      return;
    case Collective::reduce:
      a.check(a.ncclReduce(c.send, c.recv, c.count, t, nccl_op(c.op), c.root, comm_, nullptr), "ncclReduce");
      return;
    case Collective::all_to_all:
      a.check(a.ncclAlltoAll(c.send, c.recv, c.count, t, comm_, nullptr), "ncclAlltoAll");
      return;
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      break;  // not timed (all_colls)
  }
}

void NcclBackend::abort() noexcept {
  aborted_ = true;
  if (comm_) api_->ncclCommAbort(comm_);
  control_.abort();
}

}  // namespace perf
