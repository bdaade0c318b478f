// One operation, described once where the API receives it and passed down whole: the
// communicator checks it, the plan cache is keyed by it, the engine runs a plan over its
// buffers. Its buffer geometry comes from the one per-collective table
// (include/strata/collective.hpp); every argument check lives in describe().
#pragma once

#include <cstddef>
#include <cstdint>

#include "ground/memory_kind.hpp"
#include "strata/collective.hpp"
#include "strata/types.hpp"

namespace strata {

struct Call {
  Collective coll = Collective::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's meaning for each collective (include/strata/collective.hpp)
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;  // broadcast, reduce: the root; send, recv: the peer
  MemoryKind memory = MemoryKind::host;  // host only until the device path lands
  void* stream = nullptr;  // the stream a device call is ordered on; unused for host memory
  // Derived by describe():
  Geometry geo;
  bool in_place = false;  // the buffers are the call's in-place form

  size_t bytes() const { return count * size_of(type); }
};

// The description of `coll` as this rank passes it, checked: InvalidArgument names the
// call and the argument (type, count, op, root or peer, null buffers, overlapping buffers
// that are not the in-place form). Arguments a collective does not take are ignored.
Call describe(Collective coll, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              int rank, int nranks);

}  // namespace strata
