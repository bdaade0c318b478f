#include "strata_backend.hpp"

namespace perf {

StrataBackend::StrataBackend(strata::Comm comm) : comm_(std::move(comm)) {
  rank_ = comm_.rank();
  size_ = comm_.size();
}

StrataBackend::~StrataBackend() {
  if (!aborted_ && comm_.valid()) {
    try {
      comm_.destroy();
    } catch (...) {
      // Leaving anyway; the run's status was already decided.
    }
  }
}

void StrataBackend::run(const CollCall& c) {
  strata::Comm& comm = comm_;
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

void StrataBackend::barrier() { comm_.barrier(); }

double StrataBackend::all_reduce(double v, ScalarOp op) {
  const strata::ReduceOp sop = op == ScalarOp::sum   ? strata::ReduceOp::sum
                               : op == ScalarOp::min ? strata::ReduceOp::min
                                                     : strata::ReduceOp::max;
  double out = 0;
  comm_.all_reduce(&v, &out, 1, strata::DataType::float64, sop);
  return out;
}

void StrataBackend::abort() noexcept {
  aborted_ = true;
  try {
    if (comm_.valid()) comm_.abort();
  } catch (...) {
  }
}

}  // namespace perf
