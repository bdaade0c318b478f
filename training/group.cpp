#include "group.hpp"

#include <cstring>

namespace strata::train {

using strata::DataType;
using strata::ReduceOp;

strata::Request Group::all_reduce_avg(float* buf, size_t n) {
  if (!distributed()) return {};
  return comm_.all_reduce_async(buf, buf, n, DataType::float32, ReduceOp::avg);
}

strata::Request Group::reduce_scatter_avg(const float* send, float* recv, size_t n) {
  if (!distributed()) {
    if (recv != send) std::memcpy(recv, send, n * sizeof(float));
    return {};
  }
  return comm_.reduce_scatter_async(send, recv, n, DataType::float32, ReduceOp::avg);
}

strata::Request Group::all_gather(float* buf, size_t n) {
  if (!distributed()) return {};
  return comm_.all_gather_async(buf + rank_ * n, buf, n, DataType::float32);
}

double Group::all_reduce_sum(double x) {
  if (distributed()) comm_.all_reduce(&x, &x, 1, DataType::float64, ReduceOp::sum);
  return x;
}

void Group::barrier() {
  if (distributed()) comm_.barrier();
}

void Group::destroy() {
  if (distributed()) comm_.destroy();
  comm_ = strata::Comm();
}

}  // namespace strata::train
