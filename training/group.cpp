#include "group.hpp"

#include <cstring>

namespace strata::train {

using strata::DataType;
using strata::ReduceOp;

void Group::copy(float* recv, const float* send, size_t n) const {
  if (recv == send) return;
  if (memory_)
    memory_->copy(recv, send, n * sizeof(float));
  else
    std::memcpy(recv, send, n * sizeof(float));
}

strata::Request Group::all_reduce(const float* send, float* recv, size_t n, ReduceOp op) {
  if (!distributed()) {
    copy(recv, send, n);
    return {};
  }
  return count(n, comm_.all_reduce_async(send, recv, n, DataType::float32, op));
}

strata::Request Group::reduce_scatter(const float* send, float* recv, size_t n, ReduceOp op) {
  if (!distributed()) {
    copy(recv, send, n);
    return {};
  }
  return count(n * size_, comm_.reduce_scatter_async(send, recv, n, DataType::float32, op));
}

strata::Request Group::all_gather(const float* send, float* recv, size_t n) {
  if (!distributed()) {
    copy(recv, send, n);
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

strata::Request Group::send(const float* buf, size_t n, int peer) {
  return count(n, comm_.send_async(buf, n, DataType::float32, peer));
}

strata::Request Group::recv(float* buf, size_t n, int peer) {
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
  if (distributed()) count(n, comm_.broadcast_async(buf, buf, n, DataType::float32, root)).wait();
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
