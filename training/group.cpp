#include "group.hpp"

#include <cstring>
#include <exception>
#include <vector>
#include <strata/device.hpp>

#include "ground/device/backend.hpp"

namespace strata::train {

using strata::DataType;
using strata::ReduceOp;

void Group::copy(void* recv, const void* send, size_t n, DataType type) const {
  if (recv == send) return;
  if (memory_)
    memory_->copy(recv, send, n * strata::size_of(type));
  else
    std::memcpy(recv, send, n * strata::size_of(type));
}

strata::device::Stream Group::stream_for(const void* buf) const {
  if (!memory_ || !memory_->stream()) return nullptr;
  return strata::device::kind_of(buf) == strata::MemoryKind::device ? memory_->stream() : nullptr;
}

void Group::check() const {
  if (!distributed()) return;
  if (std::exception_ptr e = comm_.async_error()) std::rethrow_exception(e);
}

strata::Request Group::all_reduce(const void* send, void* recv, size_t n, DataType type, ReduceOp op) {
  if (!distributed()) {
    copy(recv, send, n, type);
    return {};
  }
  if (strata::device::Stream s = stream_for(recv)) {
    count(n, comm_.all_reduce(send, recv, n, type, op, s), type);
    return {};
  }
  return count(n, comm_.all_reduce_async(send, recv, n, type, op), type);
}

strata::Request Group::reduce_scatter(const void* send, void* recv, size_t n, DataType type, ReduceOp op) {
  if (!distributed()) {
    copy(recv, send, n, type);
    return {};
  }
  if (strata::device::Stream s = stream_for(recv)) {
    count(n * size_, comm_.reduce_scatter(send, recv, n, type, op, s), type);
    return {};
  }
  return count(n * size_, comm_.reduce_scatter_async(send, recv, n, type, op), type);
}

strata::Request Group::all_gather(const float* send, float* recv, size_t n, strata::device::Stream on) {
  if (!distributed()) {
    copy(recv, send, n);
    return {};
  }
  if (strata::device::Stream s = stream_for(recv)) {
    if (on) s = on;
    count(n * size_, comm_.all_gather(send, recv, n, DataType::float32, s));
    return {};
  }
  return count(n * size_, comm_.all_gather_async(send, recv, n, DataType::float32));
}

double Group::all_reduce_sum(double x) {
  if (distributed()) {
    comm_.all_reduce(&x, &x, 1, DataType::float64, ReduceOp::sum);
    bytes_ += sizeof x;
    ++calls_;
  }
  return x;
}

struct Group::SendStream {
  strata::device::Execution& ex;
  const Kernels& memory;
  strata::device::Stream stream;
  strata::device::Event copied;  // the trainer's stream up to the copy into a slot
  struct Slot {
    void* buf;
    size_t bytes;
    strata::device::Event sent;  // never recorded: free
  };
  std::vector<Slot> slots;

  SendStream(strata::device::Execution& e, const Kernels& k)
      : ex(e), memory(k), stream(e.stream_create()), copied(e.event_create()) {}
  ~SendStream() {
    ex.stream_destroy(stream);  // waits for its sends (a failed one releases it)
    ex.event_destroy(copied);
    for (Slot& s : slots) {
      ex.event_destroy(s.sent);
      memory.free(s.buf);
    }
  }
  // A slot of at least `bytes` whose send is over.
  Slot& free_slot(size_t bytes) {
    for (Slot& s : slots)
      if (s.bytes >= bytes && ex.event_query(s.sent)) return s;
    slots.push_back({memory.alloc(bytes), bytes, ex.event_create()});
    return slots.back();
  }
};

strata::Request Group::send(const float* buf, size_t n, int peer) {
  if (stream_for(buf)) {
    if (!sends_)
      sends_ = std::make_shared<SendStream>(strata::device::require_backend("a device send").execution(), *memory_);
    SendStream& s = *sends_;
    SendStream::Slot& slot = s.free_slot(n * sizeof(float));
    memory_->copy(slot.buf, buf, n * sizeof(float));
    s.ex.event_record(s.copied, memory_->stream());
    s.ex.stream_wait(s.stream, s.copied);
    count(n, comm_.send(slot.buf, n, DataType::float32, peer, s.stream));
    s.ex.event_record(slot.sent, s.stream);
    return {};
  }
  return count(n, comm_.send_async(buf, n, DataType::float32, peer));
}

strata::Request Group::recv(float* buf, size_t n, int peer) {
  if (strata::device::Stream s = stream_for(buf)) {
    comm_.recv(buf, n, DataType::float32, peer, s);
    return {};
  }
  return comm_.recv_async(buf, n, DataType::float32, peer);
}

void Group::barrier() {
  if (distributed()) comm_.barrier();
}

Group Group::split(int color, int key) {
  if (!distributed()) return Group();
  strata::Comm c = comm_.split(color, key);
  if (c.valid() && c.size() == 1) {
    c.destroy();
    return Group();
  }
  return c.valid() ? Group(c) : Group();
}

Group Group::shrink() {
  if (!distributed()) return Group();
  strata::Comm c = comm_.shrink();
  if (c.size() == 1) {
    c.destroy();
    return Group();
  }
  return Group(c);
}

void Group::broadcast(float* buf, size_t n, int root) {
  if (!distributed()) return;
  if (strata::device::Stream s = stream_for(buf))
    count(n, comm_.broadcast(buf, buf, n, DataType::float32, root, s)).wait();
  else
    count(n, comm_.broadcast_async(buf, buf, n, DataType::float32, root)).wait();
}

std::vector<strata::HierarchyLevel> Group::hierarchy() const {
  return distributed() ? comm_.hierarchy() : std::vector<strata::HierarchyLevel>{};
}

void Group::destroy() {
  if (distributed()) comm_.destroy();
  comm_ = strata::Comm();
}

void Group::abort() {
  if (distributed()) comm_.abort();
  comm_ = strata::Comm();
}

}  // namespace strata::train
