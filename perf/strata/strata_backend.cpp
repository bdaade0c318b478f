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
    // nccl-tests' ring shift (or the pipeline) as one group.
    const P2pPeers peers = p2p_peers(*p, rank_, size_);
    comm.group_start();
    if (peers.send_to >= 0) comm.send(c.send, c.count, t, peers.send_to);
    if (peers.recv_from >= 0) comm.recv(c.recv, c.count, t, peers.recv_from);
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
