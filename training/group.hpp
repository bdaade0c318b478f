// A group of ranks that the trainer communicates in (data-parallel, tensor-parallel, a
// pipeline link, or the whole job): a Strata communicator, or one process (no
// STRATA_RANK, or a group of one) where every collective is the identity. Collectives are
// on float32; an empty Request (one process) counts as complete.
//
// On a device (set_memory with a device's Kernels), a call on buffers in device memory is
// the communicator's stream form on the trainer's stream: it runs after the kernels queued
// before it and the kernels queued after it wait for it, so the call returns an empty
// Request (nothing for the host to wait for) and the step never waits on the host for a
// collective. A failure is kept by the communicator (Comm::async_error): the next call
// throws it, and check() does. Calls on host memory (the loss, the norm) stay host calls;
// a communicator runs its calls in issue order, host and device alike.
// Sends are the exception: a send waits for its receiver, and on the trainer's stream it
// would hold back what the pipeline's schedule queues after it (1F1B: stage 0's second
// activation send waits for stage 1, which first waits for the gradient that stage 0 is to
// receive after that send). So a device send copies the buffer on the trainer's stream
// into a slot of the group's own and leaves from the group's send stream after that copy,
// as a host send that buffers its message: the caller may write the buffer again at once
// (the empty Request), and a slot is reused only once its send is over (an event the host
// polls; another slot is made meanwhile), so neither stream nor host waits for a receiver. Each group counts the
// bytes of the calls it issues (the size of each collective's whole vector; for a send,
// the message), which is how strata-train reports traffic per group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <strata/strata.hpp>
#include <vector>

#include "kernels.hpp"

namespace strata::train {

class Group {
 public:
  Group() = default;  // one process
  explicit Group(strata::Comm comm) : comm_(comm), rank_(comm.rank()), size_(comm.size()) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return comm_.valid(); }
  // The memory of the buffers this group is given (the trainer's device): how one
  // process copies between them. Unset: host memory.
  void set_memory(const Kernels* k) { memory_ = k; }
  // Throws the error of a failed device call, if any (a poll: it does not wait).
  void check() const;

  // recv = send reduced over the ranks (in place when equal). The calls on void* take n
  // elements of `type` (the gradients' wire type, --grad-dtype); the others are float32.
  strata::Request all_reduce(const void* send, void* recv, size_t n, strata::DataType type, strata::ReduceOp op);
  strata::Request all_reduce(const float* send, float* recv, size_t n, strata::ReduceOp op) {
    return all_reduce(send, recv, n, strata::DataType::float32, op);
  }
  strata::Request all_reduce_avg(float* buf, size_t n) {
    return all_reduce(buf, buf, n, strata::ReduceOp::avg);
  }
  // send holds size()*n elements; this rank's reduced slice lands in recv (n elements;
  // in place when recv == send + rank*n).
  strata::Request reduce_scatter(const void* send, void* recv, size_t n, strata::DataType type,
                                 strata::ReduceOp op);
  strata::Request reduce_scatter(const float* send, float* recv, size_t n, strata::ReduceOp op) {
    return reduce_scatter(send, recv, n, strata::DataType::float32, op);
  }
  strata::Request reduce_scatter_avg(const float* send, float* recv, size_t n) {
    return reduce_scatter(send, recv, n, strata::ReduceOp::avg);
  }
  // Every rank's n elements, in rank order, into recv (size()*n elements; in place when
  // send == recv + rank*n). `on`: a stream of this group's device to order a device call
  // on instead of the trainer's (ZeRO-3's gathers run on a stream of their own).
  strata::Request all_gather(const float* send, float* recv, size_t n, strata::device::Stream on = nullptr);
  // In place: this rank's n elements at buf + rank*n go to every rank.
  strata::Request all_gather(float* buf, size_t n) { return all_gather(buf + rank_ * n, buf, n); }
  double all_reduce_sum(double x);
  strata::Request send(const float* buf, size_t n, int peer);
  strata::Request recv(float* buf, size_t n, int peer);
  void barrier();

  // Collective over this group: ranks with the same color form a new group, ordered by
  // key; color < 0 gives none (a one-process group). A group of one is kept as one
  // process, with no communicator.
  Group split(int color, int key);
  // After a member failed, collective over the survivors (Comm::shrink): their group, in
  // their old order (one process when only this rank is left). This group can then only be
  // destroyed.
  Group shrink();
  // n floats (or any bytes, as floats: nothing is computed on them) from `root` to every rank.
  void broadcast(float* buf, size_t n, int root);
  // The hierarchy levels of this group's ranks (empty for one process).
  std::vector<strata::HierarchyLevel> hierarchy() const;

  uint64_t bytes() const { return bytes_; }  // issued since construction
  uint64_t calls() const { return calls_; }

  void destroy();
  // Local: fails what runs on this group, and its peers see this rank leave (Comm::abort).
  void abort();

 private:
  strata::Request count(size_t elems, strata::Request r, strata::DataType type = strata::DataType::float32) {
    bytes_ += elems * strata::size_of(type);
    ++calls_;
    return r;
  }
  // The stream a call on `buf` is ordered on: the trainer's when it is device memory of
  // this group's device; nullptr for a host call.
  strata::device::Stream stream_for(const void* buf) const;
  // One process: recv = send (n elements of type).
  void copy(void* recv, const void* send, size_t n, strata::DataType type = strata::DataType::float32) const;
  strata::Comm comm_;
  struct SendStream;
  const Kernels* memory_ = nullptr;
  std::shared_ptr<SendStream> sends_;  // made by the first device send
  int rank_ = 0;
  int size_ = 1;
  uint64_t bytes_ = 0, calls_ = 0;
};

}  // namespace strata::train
