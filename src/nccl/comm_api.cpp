// The communicator's entry points: creation (init, split, shrink), its end, queries,
// errors, groups and reduction operators.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "comm.hpp"
#include "config.hpp"
#include "debug.hpp"
#include "entry.hpp"
#include "errors.hpp"
#include "group.hpp"
#include "types.hpp"

using namespace strata_nccl;

namespace {

strata::UniqueId to_strata(const ncclUniqueId& id) {
  static_assert(sizeof id.internal == sizeof(strata::UniqueId::bytes), "both ids are 128 bytes");
  strata::UniqueId u;
  std::memcpy(u.bytes.data(), id.internal, sizeof id.internal);
  return u;
}

template <typename T>
void need(const T* p, const char* what) {
  if (!p) throw strata::InvalidArgument(std::string(what) + " is NULL");
}

// Makes `state`'s communicator: inside a group at its end; non-blocking on a thread
// (ncclInProgress); otherwise now, handing out the handle only once it exists.
ncclResult_t create(ncclComm_t* out, std::shared_ptr<CommState> state, CommState::Maker make,
                    std::shared_ptr<CommState> parent = nullptr) {
  announce_version();
  if (in_group()) {
    *out = adopt(state);
    defer_creation(std::move(state), std::move(make), std::move(parent));
    return ncclSuccess;
  }
  if (!state->blocking) {
    *out = adopt(state);
    state->create_in_background(std::move(make), std::move(parent));
    return ncclInProgress;
  }
  state->create_now(make);
  *out = adopt(std::move(state));
  return ncclSuccess;
}

// A query of a live communicator into `*out`.
template <typename Get>
ncclResult_t query(const char* fn, ncclComm_t comm, int* out, const char* out_name, Get&& get) {
  return guarded(fn, [&] {
    auto state = lookup(comm);
    need(out, out_name);
    *out = get(*state);
    return ncclSuccess;
  });
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config) {
  need(comm, "comm");
  *comm = nullptr;
  const Settings s = read_config(config, {});
  if (nranks < 1) throw strata::InvalidArgument("nranks is " + std::to_string(nranks) + "; it must be at least 1");
  if (rank < 0 || rank >= nranks)
    throw strata::InvalidArgument("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  auto state = std::make_shared<CommState>(s.blocking, current_cuda_device());
  const strata::UniqueId u = to_strata(id);
  return create(comm, std::move(state), [=] { return strata::Comm::init_rank(nranks, u, rank); });
}

}  // namespace

extern "C" {

ncclResult_t pncclGetVersion(int* version) {
  return guarded("ncclGetVersion", [&] {
    need(version, "version");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
  });
}

ncclResult_t pncclGetUniqueId(ncclUniqueId* id) {
  return guarded("ncclGetUniqueId", [&] {
    need(id, "uniqueId");
    const strata::UniqueId u = strata::get_unique_id();
    std::memcpy(id->internal, u.bytes.data(), sizeof id->internal);
    return ncclSuccess;
  });
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig", [&] { return init_rank(comm, nranks, id, rank, config); });
}

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return guarded("ncclCommInitRank", [&] { return init_rank(comm, nranks, id, rank, nullptr); });
}

ncclResult_t pncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, ncclUniqueId* ids,
                                       ncclConfig_t* config) {
  return guarded("ncclCommInitRankScalable", [&] {
    need(ids, "commIds");
    if (nId < 1) throw strata::InvalidArgument("nId is " + std::to_string(nId) + "; it must be at least 1");
    // One root serves every rank: the first id's (docs/nccl.md); the others' roots expire.
    return init_rank(comm, nranks, ids[0], rank, config);
  });
}

ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&] {
    need(comms, "comm");
    if (ndev < 1) throw strata::InvalidArgument("ndev is " + std::to_string(ndev) + "; it must be at least 1");
    // Every rank of one communicator in this process: made at once, each on its own thread.
    const strata::UniqueId u = strata::get_unique_id();
    std::vector<std::shared_ptr<CommState>> states;
    for (int r = 0; r < ndev; ++r) {
      comms[r] = nullptr;
      states.push_back(std::make_shared<CommState>(true, devlist ? devlist[r] : r));
      states.back()->create_in_background([=] { return strata::Comm::init_rank(ndev, u, r); });
    }
    announce_version();
    std::exception_ptr first;
    for (auto& s : states) {
      try {
        s->made();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) {
      for (auto& s : states) s->abort();
      std::rethrow_exception(first);
    }
    for (int r = 0; r < ndev; ++r) comms[r] = adopt(states[r]);
    return ncclSuccess;
  });
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&] {
    auto parent = lookup(comm);
    need(newcomm, "newcomm");
    *newcomm = nullptr;
    const Settings s = read_config(config, {parent->blocking});
    auto state = std::make_shared<CommState>(s.blocking, parent->cuda_device);
    CommState::Maker make = [parent, color, key] { return parent->made().split(color, key); };
    if (color != NCCL_SPLIT_NOCOLOR) return create(newcomm, std::move(state), std::move(make), parent);
    // This rank takes part in the split and gets no communicator: the split still runs (it
    // is collective) on a state no handle refers to.
    ncclComm_t none = nullptr;
    const ncclResult_t r = create(&none, state, std::move(make), parent);
    if (none) forget(none);
    return r;
  });
}

ncclResult_t pncclCommShrink(ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm, ncclConfig_t* config,
                             int flags) {
  return guarded("ncclCommShrink", [&] {
    auto parent = lookup(comm);
    need(newcomm, "newcomm");
    *newcomm = nullptr;
    if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
      throw strata::InvalidArgument("shrinkFlags is " + std::to_string(flags) +
                                    "; expected NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
    if (nexclude < 0 || (nexclude > 0 && !exclude))
      throw strata::InvalidArgument("excludeRanksList is NULL or excludeRanksCount negative");
    const strata::Comm c = parent->made();
    const int nranks = c.size(), rank = c.rank();
    std::vector<int> gone(exclude, exclude + nexclude);
    std::sort(gone.begin(), gone.end());
    for (size_t i = 0; i < gone.size(); ++i) {
      if (gone[i] < 0 || gone[i] >= nranks || (i > 0 && gone[i] == gone[i - 1]))
        throw strata::InvalidArgument("excludeRanksList holds " + std::to_string(gone[i]) +
                                      ", not a distinct rank of this " + std::to_string(nranks) +
                                      "-rank communicator");
      if (gone[i] == rank)
        throw strata::InvalidArgument("excludeRanksList holds this rank itself; an excluded rank does not call "
                                      "ncclCommShrink");
    }
    const Settings s = read_config(config, {parent->blocking});
    auto state = std::make_shared<CommState>(s.blocking, parent->cuda_device);
    // Strata's shrink finds the survivors itself (docs/api.md, "Shrink"); they must be the
    // ranks the list leaves, numbered as NCCL numbers them (old order).
    const int want_size = nranks - nexclude;
    const int want_rank = rank - static_cast<int>(std::lower_bound(gone.begin(), gone.end(), rank) - gone.begin());
    return create(newcomm, std::move(state), [parent, want_size, want_rank] {
      strata::Comm shrunk = parent->made().shrink();
      if (shrunk.size() != want_size || shrunk.rank() != want_rank) {
        const std::string got = "rank " + std::to_string(shrunk.rank()) + " of " + std::to_string(shrunk.size());
        shrunk.destroy();
        throw strata::InvalidUsage("the ranks still alive are not those excludeRanksList leaves: this rank became " +
                                   got + ", not rank " + std::to_string(want_rank) + " of " +
                                   std::to_string(want_size));
      }
      return shrunk;
    }, parent);
  });
}

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&] {
    lookup(comm)->finalize();
    return ncclSuccess;
  });
}

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] {
    auto state = lookup(comm);
    forget(comm);  // released whatever destroy() says
    state->destroy();
    return ncclSuccess;
  });
}

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] {
    auto state = lookup(comm);
    forget(comm);
    state->abort();
    return ncclSuccess;
  });
}

const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled CUDA error";
    case ncclSystemError: return "system error (the OS refused something; see ncclGetLastError)";
    case ncclInternalError: return "internal error (a bug in Strata; see ncclGetLastError)";
    case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError: return "remote error: a peer failed, left or made no progress (see ncclGetLastError)";
    case ncclInProgress: return "operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}

const char* pncclGetLastError(ncclComm_t comm) {
  if (!last_error().empty() || !comm) return last_error().c_str();
  // Nothing failed on this thread: the communicator's own failure (a creation on a thread).
  thread_local std::string async;
  async.clear();
  try {
    lookup(comm)->async_error(&async);
  } catch (const strata::Error&) {
  }
  return async.c_str();
}

void pncclResetDebugInit(void) {}  // STRATA_DEBUG is read once per process (docs/nccl.md)

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  return guarded("ncclCommGetAsyncError", [&] {
    auto state = lookup(comm);
    need(error, "asyncError");
    std::string what;
    *error = state->async_error(&what);
    if (*error != ncclSuccess && *error != ncclInProgress) fail("ncclCommGetAsyncError", *error, what);
    return ncclSuccess;
  });
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return query("ncclCommCount", comm, count, "count", [](CommState& s) { return s.use().size(); });
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return query("ncclCommUserRank", comm, rank, "rank", [](CommState& s) { return s.use().rank(); });
}

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return query("ncclCommCuDevice", comm, device, "device", [](CommState& s) { return s.cuda_device; });
}

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&] {
    auto state = lookup(comm);
    need(op, "op");
    need(scalar, "scalar");
    const strata::DataType t = data_type(type);
    PreMulSum p{type, {}, nullptr};
    if (residence == ncclScalarHostImmediate) {
      const auto* bytes = static_cast<const std::byte*>(scalar);
      p.value.assign(bytes, bytes + strata::size_of(t));
    } else if (residence == ncclScalarDevice) {
      p.where = scalar;  // read at each call; host memory on the host path
    } else {
      throw strata::InvalidArgument("residence " + std::to_string(static_cast<int>(residence)) +
                                    " is neither ncclScalarDevice nor ncclScalarHostImmediate");
    }
    *op = state->add_op(std::move(p));
    return ncclSuccess;
  });
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy", [&] {
    auto state = lookup(comm);
    if (builtin_op(op)) throw strata::InvalidArgument("op " + std::to_string(static_cast<int>(op)) + " is built in");
    state->remove_op(op);
    return ncclSuccess;
  });
}

ncclResult_t pncclGroupStart(void) {
  return guarded("ncclGroupStart", [&] {
    group_start();
    return ncclSuccess;
  });
}

ncclResult_t pncclGroupEnd(void) {
  return guarded("ncclGroupEnd", [&] { return group_end(); });
}

}  // extern "C"

STRATA_NCCL_ALIAS(ncclGetVersion)
STRATA_NCCL_ALIAS(ncclGetUniqueId)
STRATA_NCCL_ALIAS(ncclCommInitRankConfig)
STRATA_NCCL_ALIAS(ncclCommInitRank)
STRATA_NCCL_ALIAS(ncclCommInitRankScalable)
STRATA_NCCL_ALIAS(ncclCommInitAll)
STRATA_NCCL_ALIAS(ncclCommSplit)
STRATA_NCCL_ALIAS(ncclCommShrink)
STRATA_NCCL_ALIAS(ncclCommFinalize)
STRATA_NCCL_ALIAS(ncclCommDestroy)
STRATA_NCCL_ALIAS(ncclCommAbort)
STRATA_NCCL_ALIAS(ncclGetErrorString)
STRATA_NCCL_ALIAS(ncclGetLastError)
STRATA_NCCL_ALIAS(ncclResetDebugInit)
STRATA_NCCL_ALIAS(ncclCommGetAsyncError)
STRATA_NCCL_ALIAS(ncclCommCount)
STRATA_NCCL_ALIAS(ncclCommUserRank)
STRATA_NCCL_ALIAS(ncclCommCuDevice)
STRATA_NCCL_ALIAS(ncclRedOpCreatePreMulSum)
STRATA_NCCL_ALIAS(ncclRedOpDestroy)
STRATA_NCCL_ALIAS(ncclGroupStart)
STRATA_NCCL_ALIAS(ncclGroupEnd)
