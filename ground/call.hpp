// One operation, described once where the API receives it and passed down whole: the
// communicator checks it, the plan cache is keyed by it, the engine runs a plan over its
// buffers. Its buffer geometry comes from the one per-collective table
// (include/strata/collective.hpp); every argument check lives in describe().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ground/memory_kind.hpp"
#include "strata/collective.hpp"
#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata {

// A check whose verdict depends on this rank alone (its pointers, its peer, its group):
// the other ranks cannot reach it themselves, so describe() records it instead of
// throwing, and the communicator makes the call fail on every rank (docs/api.md,
// "Argument checks"). Sent to the other ranks as one byte.
enum class Fault : uint8_t {
  none,
  null_buffer,  // a buffer this rank uses is null
  overlap,      // send and receive buffers overlap but are not the in-place form
  bad_peer,     // send/recv: the peer is not a rank of the communicator
  in_group,     // a collective (or split) between group_start and group_end
  self_group,   // a group's sends to self and receives from self do not pair up
  mismatch,     // STRATA_CHECK: the ranks asked for different operations
  mixed_memory, // the buffers this rank uses are of different memory kinds (host and device)
  not_device,   // a call on a stream with a buffer that is not device memory (host, or freed)
};
inline constexpr int kNumFaults = 9;
// For the other ranks' messages: "a null buffer", ...
const char* summary(Fault f);
// The category a fault is reported as: invalid_usage for in_group, else invalid_argument.
ErrorKind kind_of(Fault f);

struct Call {
  Collective coll = Collective::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's meaning for each collective (include/strata/collective.hpp)
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;  // broadcast, reduce: the root; send, recv: the peer
  MemoryKind memory = MemoryKind::host;  // of the buffers this rank uses (describe() finds it)
  void* stream = nullptr;  // the stream a device call is ordered on (nullptr: the default stream)
  // A pre-multiplied sum (op is then sum): each input element times a factor first. A
  // factor in host memory is copied here when the call is made; one in device memory is
  // read where it is when the call runs.
  struct PreMul {
    bool on = false;
    const void* device_factor = nullptr;  // null: the factor is `value`
    alignas(8) unsigned char value[8] = {};
  } premul;
  // Derived by describe():
  Geometry geo;
  bool in_place = false;  // the buffers are the call's in-place form
  Fault fault = Fault::none;  // a check that failed on this rank alone (see Fault)

  size_t bytes() const { return count * size_of(type); }
};

// The description of `coll` as this rank passes it, checked. What every rank must pass
// alike (type, count, op, a collective's root) throws InvalidArgument naming the call and
// the argument: every rank reaches the same verdict. What depends on this rank alone
// (null buffers, overlapping buffers that are not the in-place form, a send/recv peer out
// of range) is recorded in `fault` for the communicator to refuse everywhere. Arguments a
// collective does not take are ignored.
//
// The memory kind comes from the buffers this rank uses. A call on a stream (`on_stream`)
// loads the device backend and takes device buffers only (anything else: Fault::not_device);
// a call without one asks only a backend already loaded (so a host-only process pays one
// atomic load), and its buffers are then host memory, or device memory on the default
// stream. Buffers of both kinds: Fault::mixed_memory.
Call describe(Collective coll, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              int rank, int nranks, bool on_stream = false, void* stream = nullptr);

// This rank's message for the call's fault, naming the call and the argument.
std::string fault_message(const Call& k, int nranks);
// Throws the exception class of kind_of(f) (InvalidUsage or InvalidArgument) with `what`.
[[noreturn]] void throw_fault(Fault f, const std::string& what);

}  // namespace strata
