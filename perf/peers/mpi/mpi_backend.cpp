#include "mpi_backend.hpp"

#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "numeric.hpp"

namespace perf {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + " failed: " + msg);
}

int to_int(size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) throw std::runtime_error("count does not fit MPI's int");
  return static_cast<int>(count);
}

void* in_place_or(const void* p, bool in_place) {
  return in_place ? MPI_IN_PLACE : const_cast<void*>(p);
}

}  // namespace

MpiBackend::MpiBackend() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    owns_mpi_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  types_ = std::make_unique<MpiTypes>();
}

MpiBackend::~MpiBackend() {
  types_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

void MpiBackend::divide_by_size(void* buf, size_t count, DataType t) const {
  for (size_t i = 0; i < count; ++i) {
    const double v = load(t, buf, i) / size_;
    store(t, buf, i, is_floating(t) ? v : std::trunc(v));
  }
}

void MpiBackend::run(const CollCall& c) {
  const int n = to_int(c.count);
  const bool red = has_op(c.coll);
  const MPI_Datatype dt = types_->datatype(c.type, red);
  const MPI_Op op = red ? types_->op(c.type, c.op) : MPI_OP_NULL;
  const bool avg = red && c.op == ReduceOp::avg;
  const size_t esize = size_of(c.type);
  MPI_Comm w = MPI_COMM_WORLD;
  if (const P2p* p = std::get_if<P2p>(&c.coll)) {
    // The ring shift; pipeline has no wrap-around: MPI_PROC_NULL past the ends of the
    // chain, so rank 0 only sends and the last rank only receives.
    const P2pPeers peers = p2p_peers(*p, rank_, size_);
    const int next = peers.send_to >= 0 ? peers.send_to : MPI_PROC_NULL;
    const int prev = peers.recv_from >= 0 ? peers.recv_from : MPI_PROC_NULL;
    constexpr int kTag = 7;
    if (c.in_place)
      check(MPI_Sendrecv_replace(c.recv, n, dt, next, kTag, prev, kTag, w, MPI_STATUS_IGNORE),
            "MPI_Sendrecv_replace");
    else
      check(MPI_Sendrecv(c.send, n, dt, next, kTag, c.recv, n, dt, prev, kTag, w, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
    return;
  }
  switch (std::get<Collective>(c.coll)) {
    case Collective::all_reduce:
      check(MPI_Allreduce(in_place_or(c.send, c.in_place), c.recv, n, dt, op, w), "MPI_Allreduce");
      if (avg) divide_by_size(c.recv, c.count, c.type);
      return;
    case Collective::reduce_scatter:
      if (c.in_place) {
        void* base = const_cast<void*>(c.send);
        check(MPI_Reduce_scatter_block(MPI_IN_PLACE, base, n, dt, op, w), "MPI_Reduce_scatter_block");
        if (c.recv != base) std::memmove(c.recv, base, c.count * esize);
      } else {
        check(MPI_Reduce_scatter_block(c.send, c.recv, n, dt, op, w), "MPI_Reduce_scatter_block");
      }
      if (avg) divide_by_size(c.recv, c.count, c.type);
      return;
    case Collective::all_gather:
      if (c.in_place)
        check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, n, dt, w), "MPI_Allgather");
      else
        check(MPI_Allgather(c.send, n, dt, c.recv, n, dt, w), "MPI_Allgather");
      return;
    case Collective::broadcast:
      if (!c.in_place && rank_ == c.root && c.count) std::memcpy(c.recv, c.send, c.count * esize);
      check(MPI_Bcast(c.recv, n, dt, c.root, w), "MPI_Bcast");
      return;
    case Collective::reduce:
      if (c.in_place && rank_ == c.root)
        check(MPI_Reduce(MPI_IN_PLACE, c.recv, n, dt, op, c.root, w), "MPI_Reduce");
      else
        check(MPI_Reduce(c.send, rank_ == c.root ? c.recv : nullptr, n, dt, op, c.root, w), "MPI_Reduce");
      if (avg && rank_ == c.root) divide_by_size(c.recv, c.count, c.type);
      return;
    case Collective::all_to_all:
      if (c.in_place)
        check(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, n, dt, w), "MPI_Alltoall");
      else
        check(MPI_Alltoall(c.send, n, dt, c.recv, n, dt, w), "MPI_Alltoall");
      return;
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      break;  // not timed (all_colls)
  }
}

void MpiBackend::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

double MpiBackend::all_reduce(double v, ScalarOp op) {
  const MPI_Op mop = op == ScalarOp::sum ? MPI_SUM : op == ScalarOp::min ? MPI_MIN : MPI_MAX;
  double out = 0;
  check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, mop, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

void MpiBackend::abort() noexcept { MPI_Abort(MPI_COMM_WORLD, 1); }

}  // namespace perf
