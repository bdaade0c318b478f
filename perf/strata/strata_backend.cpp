#include "strata_backend.hpp"

namespace perf {

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
  const DataType t = c.type;
  if (const P2p* p = std::get_if<P2p>(&c.coll)) {
    // nccl-tests' ring shift: send to rank+1, receive from rank-1, as one group; the
    // pipeline has no wrap-around.
    const bool ring = *p == P2p::sendrecv;
    comm.group_start();
    if (ring || rank_ + 1 < size_) comm.send(c.send, c.count, t, (rank_ + 1) % size_);
    if (ring || rank_ > 0) comm.recv(c.recv, c.count, t, (rank_ - 1 + size_) % size_);
    comm.group_end();
    return;
  }
  switch (std::get<Collective>(c.coll)) {
    case Collective::all_reduce:
      comm.all_reduce(c.send, c.recv, c.count, t, c.op);
      return;
    case Collective::reduce_scatter:
      comm.reduce_scatter(c.send, c.recv, c.count, t, c.op);
      return;
    case Collective::all_gather:
      comm.all_gather(c.send, c.recv, c.count, t);
      return;
    case Collective::broadcast:
      comm.broadcast(c.send, c.recv, c.count, t, c.root);
      return;
    case Collective::reduce:
      comm.reduce(c.send, c.recv, c.count, t, c.op, c.root);
      return;
    case Collective::all_to_all:
      comm.all_to_all(c.send, c.recv, c.count, t);
      return;
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      break;  // not timed (all_colls)
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
