#include "call.hpp"

#include <string>

#include "strata/collective.hpp"
#include "strata/device.hpp"
#include "strata/error.hpp"
#include "types.hpp"

namespace strata_nccl {

namespace {

// NCCL's collectives that are Strata's (gather, scatter, send and recv become transfers).
strata::Collective collective_of(NcclOp what) {
  switch (what) {
    case NcclOp::all_reduce: return strata::Collective::all_reduce;
    case NcclOp::reduce_scatter: return strata::Collective::reduce_scatter;
    case NcclOp::all_gather: return strata::Collective::all_gather;
    case NcclOp::broadcast: return strata::Collective::broadcast;
    case NcclOp::reduce: return strata::Collective::reduce;
    case NcclOp::all_to_all: return strata::Collective::all_to_all;
    case NcclOp::gather:
    case NcclOp::scatter:
    case NcclOp::send: return strata::Collective::send;
    case NcclOp::recv: return strata::Collective::recv;
  }
  return strata::Collective::send;
}

bool reduces(NcclOp what) {
  return what == NcclOp::all_reduce || what == NcclOp::reduce_scatter || what == NcclOp::reduce;
}

// Gather and scatter as NCCL defines them: `count` elements from (to) every rank, the
// root's buffer holding rank r's block at r * count; the root sends to (receives from)
// itself inside the group.
std::vector<StrataOp> rooted_transfers(const NcclCall& c, strata::DataType t, int rank, int nranks) {
  if (c.root < 0 || c.root >= nranks)
    throw strata::InvalidArgument("root " + std::to_string(c.root) + " is not a rank of this " +
                                  std::to_string(nranks) + "-rank communicator");
  const size_t block = c.count * strata::size_of(t);
  std::vector<StrataOp> ops;
  if (c.what == NcclOp::gather) {
    if (rank == c.root)
      for (int r = 0; r < nranks; ++r)
        ops.push_back({strata::Collective::recv, nullptr, static_cast<std::byte*>(c.recv) + r * block, c.count, t,
                       strata::ReduceOp::sum, r});
    ops.push_back({strata::Collective::send, c.send, nullptr, c.count, t, strata::ReduceOp::sum, c.root});
  } else {
    if (rank == c.root)
      for (int r = 0; r < nranks; ++r)
        ops.push_back({strata::Collective::send, static_cast<const std::byte*>(c.send) + r * block, nullptr, c.count,
                       t, strata::ReduceOp::sum, r});
    ops.push_back({strata::Collective::recv, nullptr, c.recv, c.count, t, strata::ReduceOp::sum, c.root});
  }
  return ops;
}

}  // namespace

void check(const NcclCall& call, const CommState& comm) {
  data_type(call.type);
  if (reduces(call.what) && !builtin_op(call.op)) {
    const PreMulSum p = comm.op(call.op);
    if (p.type != call.type)
      throw strata::InvalidArgument(std::string("op ") + std::to_string(static_cast<int>(call.op)) +
                                    " is a pre-multiplied sum made for " + name(p.type) + ", not " + name(call.type));
  }
}

namespace {

// Whether the call goes the stream-ordered device path: either buffer is device memory (a
// call mixing kinds is refused by Strata, on every rank).
bool on_device(const NcclCall& c) {
  return strata::device::kind_of(c.send) == strata::MemoryKind::device ||
         strata::device::kind_of(c.recv) == strata::MemoryKind::device;
}

// Strata's ops for the call; `device`: its buffers are device memory.
Work ops_of(const NcclCall& c, const CommState& state, const strata::Comm& comm, bool device) {
  const strata::DataType t = data_type(c.type);
  Work w;
  switch (c.what) {
    case NcclOp::gather:
    case NcclOp::scatter:
      w.transfers = true;
      w.ops = rooted_transfers(c, t, comm.rank(), comm.size());
      return w;
    case NcclOp::send:
    case NcclOp::recv:
      w.transfers = true;
      w.ops.push_back({collective_of(c.what), c.send, c.recv, c.count, t, strata::ReduceOp::sum, c.root});
      return w;
    default: break;
  }
  StrataOp op{collective_of(c.what), c.send, c.recv, c.count, t, strata::ReduceOp::sum, c.root};
  if (reduces(c.what)) {
    if (auto builtin = builtin_op(c.op)) {
      op.op = *builtin;
    } else {
      // A pre-multiplied sum: this rank's input times its scalar, then a sum.
      const PreMulSum p = state.op(c.op);
      if (device) {
        // Strata stages the input scaled, on the call's stream; a host value is read when the
        // call is posted (kept here until then: `p` is a copy).
        if (p.where) {
          op.premul = p.where;
        } else {
          w.scaled = p.value;
          op.premul = w.scaled.data();
        }
        w.ops.push_back(op);
        return w;
      }
      if (strata::device::kind_of(p.scalar()) == strata::MemoryKind::device)
        throw strata::InvalidUsage("op " + std::to_string(static_cast<int>(c.op)) +
                                   " is a pre-multiplied sum (ncclRedOpCreatePreMulSum) whose scalar is in device "
                                   "memory (ncclScalarDevice), on host buffers: Strata's libnccl.so.2 scales host "
                                   "buffers on the host before the call, and cannot read the scalar there; give "
                                   "device buffers, or the scalar as ncclScalarHostImmediate");
      const strata::Geometry g = strata::geometry(op.coll, c.count, comm.size(), comm.rank(), c.root);
      if (g.send_count > 0 && c.send) {
        w.scaled.resize(g.send_count * strata::size_of(t));
        strata::scale(w.scaled.data(), c.send, g.send_count, t, p.scalar());
        op.send = w.scaled.data();
      }
    }
  }
  w.ops.push_back(op);
  return w;
}

}  // namespace

Work translate(const NcclCall& c, const CommState& state, const strata::Comm& comm) {
  const bool device = on_device(c);
  Work w = ops_of(c, state, comm, device);
  for (StrataOp& o : w.ops) {
    o.on_device = device;
    o.stream = c.stream;  // a cudaStream_t is the CUDA backend's device::Stream
  }
  return w;
}

namespace {

// Blocking: runs it now and returns an empty Request; otherwise queues it.
template <typename Sync, typename Async>
strata::Request either(bool blocking, Sync&& sync, Async&& async) {
  if (!blocking) return async();
  sync();
  return {};
}

// Device buffers: queued on the op's stream, returning at once (inside a group, send and
// recv are recorded with their stream).
strata::Request post_on_stream(strata::Comm& c, const StrataOp& o) {
  if (o.premul) {
    const strata::PreMulSum p{o.premul};
    switch (o.coll) {
      case strata::Collective::all_reduce: return c.all_reduce(o.send, o.recv, o.count, o.type, p, o.stream);
      case strata::Collective::reduce_scatter: return c.reduce_scatter(o.send, o.recv, o.count, o.type, p, o.stream);
      case strata::Collective::reduce: return c.reduce(o.send, o.recv, o.count, o.type, p, o.root, o.stream);
      default: throw strata::InternalError("the NCCL front end posted a pre-multiplied sum that is no reduction");
    }
  }
  switch (o.coll) {
    case strata::Collective::all_reduce: return c.all_reduce(o.send, o.recv, o.count, o.type, o.op, o.stream);
    case strata::Collective::reduce_scatter: return c.reduce_scatter(o.send, o.recv, o.count, o.type, o.op, o.stream);
    case strata::Collective::all_gather: return c.all_gather(o.send, o.recv, o.count, o.type, o.stream);
    case strata::Collective::broadcast: return c.broadcast(o.send, o.recv, o.count, o.type, o.root, o.stream);
    case strata::Collective::reduce: return c.reduce(o.send, o.recv, o.count, o.type, o.op, o.root, o.stream);
    case strata::Collective::all_to_all: return c.all_to_all(o.send, o.recv, o.count, o.type, o.stream);
    case strata::Collective::send: return c.send(o.send, o.count, o.type, o.root, o.stream);
    case strata::Collective::recv: return c.recv(o.recv, o.count, o.type, o.root, o.stream);
    case strata::Collective::barrier: break;
  }
  throw strata::InternalError("the NCCL front end posted a barrier");
}

strata::Request post_one(strata::Comm& c, const StrataOp& o, bool blocking) {
  if (o.on_device) return post_on_stream(c, o);
  switch (o.coll) {
    case strata::Collective::all_reduce:
      return either(blocking, [&] { c.all_reduce(o.send, o.recv, o.count, o.type, o.op); },
                    [&] { return c.all_reduce_async(o.send, o.recv, o.count, o.type, o.op); });
    case strata::Collective::reduce_scatter:
      return either(blocking, [&] { c.reduce_scatter(o.send, o.recv, o.count, o.type, o.op); },
                    [&] { return c.reduce_scatter_async(o.send, o.recv, o.count, o.type, o.op); });
    case strata::Collective::all_gather:
      return either(blocking, [&] { c.all_gather(o.send, o.recv, o.count, o.type); },
                    [&] { return c.all_gather_async(o.send, o.recv, o.count, o.type); });
    case strata::Collective::broadcast:
      return either(blocking, [&] { c.broadcast(o.send, o.recv, o.count, o.type, o.root); },
                    [&] { return c.broadcast_async(o.send, o.recv, o.count, o.type, o.root); });
    case strata::Collective::reduce:
      return either(blocking, [&] { c.reduce(o.send, o.recv, o.count, o.type, o.op, o.root); },
                    [&] { return c.reduce_async(o.send, o.recv, o.count, o.type, o.op, o.root); });
    case strata::Collective::all_to_all:
      return either(blocking, [&] { c.all_to_all(o.send, o.recv, o.count, o.type); },
                    [&] { return c.all_to_all_async(o.send, o.recv, o.count, o.type); });
    case strata::Collective::send: c.send(o.send, o.count, o.type, o.root); return {};  // inside a group: recorded
    case strata::Collective::recv: c.recv(o.recv, o.count, o.type, o.root); return {};
    case strata::Collective::barrier: break;
  }
  throw strata::InternalError("the NCCL front end posted a barrier");
}

}  // namespace

std::vector<strata::Request> post(strata::Comm& comm, std::span<const Work> work, bool blocking) {
  std::vector<strata::Request> pending;
  try {
    bool any_transfers = false;
    for (const Work& w : work) {
      if (w.transfers) any_transfers = true;
      else if (strata::Request r = post_one(comm, w.ops[0], blocking); r.valid() && !w.ops[0].on_device)
        pending.push_back(std::move(r));  // a device op is stream-ordered: not waited for
    }
    if (!any_transfers) return pending;
    bool device_transfers = false;
    comm.group_start();
    try {
      for (const Work& w : work)
        if (w.transfers)
          for (const StrataOp& o : w.ops) {
            post_one(comm, o, blocking);
            device_transfers = device_transfers || o.on_device;
          }
    } catch (...) {
      // The group holds a refused transfer: ending it refuses it on every rank (docs/api.md).
      try {
        comm.group_end();
      } catch (...) {
      }
      throw;
    }
    if (device_transfers) comm.group_end_async();  // ordered on the transfers' streams
    else if (blocking) comm.group_end();
    else if (strata::Request r = comm.group_end_async(); r.valid()) pending.push_back(std::move(r));
    return pending;
  } catch (...) {
    // What was queued reads and writes the caller's buffers: it ends before the failure is told.
    for (strata::Request& r : pending) {
      try {
        r.wait();
      } catch (...) {
      }
    }
    throw;
  }
}

}  // namespace strata_nccl
