// One NCCL operation, and the one place where it becomes Strata's (translate): buffers,
// count, type, operator, root or peer, stream. Host buffers go down Strata's host path and
// complete before the call returns (the stream is not used); device buffers
// (strata::device::kind_of) go the stream-ordered device path: the op carries the caller's
// stream, and the call returns once it is queued on it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "comm.hpp"
#include "nccl/nccl.h"
#include "strata/device.hpp"
#include "strata/strata.hpp"

namespace strata_nccl {

enum class NcclOp { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, gather, scatter, send, recv };

// As the caller passed it. `root` is the peer of send and recv.
struct NcclCall {
  const char* fn;  // "ncclAllReduce": messages name it
  NcclOp what;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  cudaStream_t stream;
};

// What every rank passes alike and the call can be refused for before it is recorded or
// run (the type; the operator, which `comm` must know). InvalidArgument.
void check(const NcclCall& call, const CommState& comm);

// One Strata call: a collective, or (coll send/recv) one transfer of a group.
struct StrataOp {
  strata::Collective coll;
  const void* send;
  void* recv;
  size_t count;
  strata::DataType type;
  strata::ReduceOp op;
  int root;
  // Device buffers: posted with the Comm overloads taking `stream`, never waited for.
  bool on_device = false;
  strata::device::Stream stream = nullptr;
  // A pre-multiplied sum on device buffers (op is then sum): its factor, in host or device
  // memory (Comm's PreMulSum overloads; on host buffers the input is scaled before the call).
  const void* premul = nullptr;
};

// An NCCL call's work on a Strata communicator: one collective, or transfers that run as
// one group (send, recv, gather, scatter). Holds a pre-multiplied sum's scaled input (host
// buffers) or its factor (device buffers) until it has been posted; move it, do not copy it.
struct Work {
  std::vector<StrataOp> ops;
  bool transfers = false;
  std::vector<std::byte> scaled;
};

// Reads the input of a pre-multiplied sum on host buffers (it scales it), so it runs when
// the call runs; on device buffers the factor goes with the call. A factor in device memory
// with host buffers is InvalidUsage.
Work translate(const NcclCall& call, const CommState& state, const strata::Comm& comm);

// Runs the work of one communicator's calls as an NCCL group does: the collectives in
// order, then every transfer as one Strata group (so a rank's sends and receives are all
// posted at once, and ranks agree on the order whatever the interleaving). Blocking:
// returns when the host work is done; otherwise returns the host requests to wait for.
// Device work is only queued on its streams (as NCCL): its requests are not returned; a
// failure of it is the communicator's async error.
std::vector<strata::Request> post(strata::Comm& comm, std::span<const Work> work, bool blocking);

}  // namespace strata_nccl
