#include "strata_backend.hpp"

namespace perf {

strata::DataType to_strata(DType t) {
  switch (t) {
    case DType::int8: return strata::DataType::int8;
    case DType::uint8: return strata::DataType::uint8;
    case DType::int32: return strata::DataType::int32;
    case DType::uint32: return strata::DataType::uint32;
    case DType::int64: return strata::DataType::int64;
    case DType::uint64: return strata::DataType::uint64;
    case DType::half: return strata::DataType::float16;
    case DType::bfloat16: return strata::DataType::bfloat16;
    case DType::float32: return strata::DataType::float32;
    case DType::float64: return strata::DataType::float64;
  }
  return strata::DataType::float32;
}

strata::ReduceOp to_strata(RedOp op) {
  switch (op) {
    case RedOp::sum: return strata::ReduceOp::sum;
    case RedOp::prod: return strata::ReduceOp::prod;
    case RedOp::max: return strata::ReduceOp::max;
    case RedOp::min: return strata::ReduceOp::min;
    case RedOp::avg: return strata::ReduceOp::avg;
  }
  return strata::ReduceOp::sum;
}

StrataBackend::StrataBackend(Joined joined) : joined_(std::move(joined)) {
  rank_ = joined_.comm.rank();
  size_ = joined_.comm.size();
}

StrataBackend::~StrataBackend() {
  if (!aborted_ && joined_.comm.valid()) {
    try {
      joined_.comm.destroy();
    } catch (...) {
      // Leaving anyway; the run's status was already decided.
    }
  }
  joined_.comm = strata::Comm();
  joined_.session.reset();
}

void StrataBackend::run(const CollCall& c) {
  strata::Comm& comm = joined_.comm;
  const strata::DataType t = to_strata(c.type);
  switch (c.coll) {
    case Coll::all_reduce:
      comm.all_reduce(c.send, c.recv, c.count, t, to_strata(c.op));
      return;
    case Coll::reduce_scatter:
      comm.reduce_scatter(c.send, c.recv, c.count, t, to_strata(c.op));
      return;
    case Coll::all_gather:
      comm.all_gather(c.send, c.recv, c.count, t);
      return;
    case Coll::broadcast:
      comm.broadcast(c.send, c.recv, c.count, t, c.root);
      return;
    case Coll::reduce:
      comm.reduce(c.send, c.recv, c.count, t, to_strata(c.op), c.root);
      return;
    case Coll::all_to_all:
      comm.all_to_all(c.send, c.recv, c.count, t);
      return;
    case Coll::sendrecv: {
      // nccl-tests' ring shift: send to rank+1, receive from rank-1, as one group.
      comm.group_start();
      comm.send(c.send, c.count, t, (rank_ + 1) % size_);
      comm.recv(c.recv, c.count, t, (rank_ - 1 + size_) % size_);
      comm.group_end();
      return;
    }
    case Coll::pipeline:
      comm.group_start();
      if (rank_ + 1 < size_) comm.send(c.send, c.count, t, rank_ + 1);
      if (rank_ > 0) comm.recv(c.recv, c.count, t, rank_ - 1);
      comm.group_end();
      return;
  }
}

void StrataBackend::barrier() { joined_.comm.barrier(); }

double StrataBackend::all_reduce(double v, ScalarOp op) {
  const strata::ReduceOp sop = op == ScalarOp::sum   ? strata::ReduceOp::sum
                               : op == ScalarOp::min ? strata::ReduceOp::min
                                                     : strata::ReduceOp::max;
  double out = 0;
  joined_.comm.all_reduce(&v, &out, 1, strata::DataType::float64, sop);
  return out;
}

void StrataBackend::abort() noexcept {
  aborted_ = true;
  try {
    if (joined_.comm.valid()) joined_.comm.abort();
  } catch (...) {
  }
  if (joined_.session) joined_.session->abort_job();
}

}  // namespace perf
