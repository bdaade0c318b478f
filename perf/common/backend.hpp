// What a driver needs from a communication library. One implementation per library:
// Strata (perf/strata), OpenMPI (perf/peers/mpi), later Gloo (perf/peers/gloo). The
// benchmark loop, data check and table are shared and only talk to this interface.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "buffer.hpp"
#include "timed_op.hpp"

namespace perf {

// One collective call with nccl semantics: every rank passes the same coll/count/type/op/
// root. `count` is the call's count argument (call_count): elements per rank for
// reduce_scatter (recvcount), all_gather (sendcount) and all_to_all (per peer). In place,
// send and recv are the pointers nccl-tests passes: all_gather send == recv + rank*count,
// reduce_scatter recv == send + rank*count, otherwise send == recv.
struct CollCall {
  Coll coll = Collective::all_reduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;  // reductions only
  int root = -1;          // broadcast / reduce only
  bool in_place = false;
};

enum class ScalarOp { sum, min, max };

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "strata", "mpi", "gloo": the table's backend=
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // False for combinations the library cannot run; such rows are skipped with a note.
  virtual bool supports(const Coll&, DataType, ReduceOp) const { return true; }

  // Runs one operation and returns when it is complete on this rank.
  virtual void run(const CollCall& call) = 0;
  virtual void barrier() = 0;
  // A double reduced over all ranks (timings, wrong-element counts); every rank gets it.
  virtual double all_reduce(double v, ScalarOp op) = 0;

  // This rank failed: give up without waiting for the others (no collective calls).
  virtual void abort() noexcept {}

  // `bytes` of the memory calls take (default: page-aligned host memory, zeroed).
  virtual std::unique_ptr<BenchBuffer> make_buffer(size_t bytes) { return std::make_unique<Buffer>(bytes); }
  // What nccl-tests' "Using devices" line names after the device number: "[host] strata",
  // "[cuda] NVIDIA H100 80GB HBM3", ...
  virtual std::string device_text() const { return "[host] " + name(); }
};

}  // namespace perf
