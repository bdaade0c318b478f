#include "tensors.hpp"

#include <torch/version.h>

#include <cstring>
#include <stdexcept>

namespace strata_torch {

namespace {

[[noreturn]] void refuse(const char* call, const std::string& why) {
  throw std::invalid_argument(std::string("strata: ") + call + ": " + why);
}

std::string dtype_name(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

}  // namespace

void check_host_dense(const at::Tensor& t, const char* call) {
  if (!t.defined()) refuse(call, "an undefined tensor");
  if (!t.device().is_cpu())
    refuse(call, "a tensor on " + t.device().str() +
                     ": the strata backend takes host (CPU) tensors only; device memory waits for the library's "
                     "device path");
  if (t.layout() != at::kStrided) refuse(call, "a sparse or other non-strided tensor; pass a dense one");
}

at::Tensor& single_tensor(std::vector<at::Tensor>& tensors, const char* call) {
  if (tensors.size() != 1)
    refuse(call, "takes exactly one tensor per rank, got a list of " + std::to_string(tensors.size()) +
                     " (one-process-many-devices lists are not supported)");
  check_host_dense(tensors[0], call);
  return tensors[0];
}

void check_same_shape(const at::Tensor& t, const at::Tensor& like, const char* call) {
  check_host_dense(t, call);
  if (t.numel() != like.numel() || t.scalar_type() != like.scalar_type())
    refuse(call, "tensors of " + std::to_string(t.numel()) + " x " + dtype_name(t) + " and " +
                     std::to_string(like.numel()) + " x " + dtype_name(like) +
                     " where every block must have the same size and type");
}

strata::ReduceOp reduction_op(const c10d::ReduceOp& op, const char* call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return strata::ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return strata::ReduceOp::prod;
    case c10d::ReduceOp::MIN: return strata::ReduceOp::min;
    case c10d::ReduceOp::MAX: return strata::ReduceOp::max;
    case c10d::ReduceOp::AVG: return strata::ReduceOp::avg;
    default: break;
  }
  refuse(call, "reduce op " + std::to_string(static_cast<int>(op.op_)) +
                   " is not supported (strata has SUM, PRODUCT, MIN, MAX and AVG; not BAND, BOR, BXOR, PREMUL_SUM)");
}

strata::DataType reduction_type(const at::Tensor& t, const c10d::ReduceOp& op, const char* call) {
  switch (t.scalar_type()) {
    case at::kFloat: return strata::DataType::float32;
    case at::kDouble: return strata::DataType::float64;
    case at::kHalf: return strata::DataType::float16;
    case at::kBFloat16: return strata::DataType::bfloat16;
    case at::kChar: return strata::DataType::int8;
    case at::kByte: return strata::DataType::uint8;
    case at::kInt: return strata::DataType::int32;
    case at::kLong: return strata::DataType::int64;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)  // torch's fp8 types
    case at::kFloat8_e4m3fn: return strata::DataType::float8_e4m3;
    case at::kFloat8_e5m2: return strata::DataType::float8_e5m2;
#endif
    case at::kBool: {
      // 0/1 bytes: min, max and product stay 0/1 (all, any, all); a sum would not.
      auto o = reduction_op(op, call);
      if (o == strata::ReduceOp::min || o == strata::ReduceOp::max || o == strata::ReduceOp::prod)
        return strata::DataType::uint8;
      refuse(call, "a bool tensor reduces with MIN, MAX or PRODUCT only");
    }
    default: break;
  }
  refuse(call, "cannot reduce " + dtype_name(t) +
                   " tensors (strata reduces float32, float64, float16, bfloat16, float8_e4m3fn, float8_e5m2 (torch >= 2.1), "
                   "int8, uint8, int32, int64 and bool; "
                   "any type can be moved)");
}

Staged::Staged(const at::Tensor& t) : user(t), buffer(t.is_contiguous() ? t : t.contiguous()) {}

void Staged::copy_back() const {
  if (!buffer.is_same(user)) user.copy_(buffer);
}

size_t total_bytes(const std::vector<at::Tensor>& tensors) {
  size_t n = 0;
  for (const auto& t : tensors) n += byte_size(t);
  return n;
}

at::Tensor pack(const std::vector<at::Tensor>& tensors) {
  at::Tensor out = at::empty({static_cast<int64_t>(total_bytes(tensors))}, at::kByte);
  char* p = static_cast<char*>(out.data_ptr());
  for (const auto& t : tensors) {
    at::Tensor c = t.contiguous();
    std::memcpy(p, c.data_ptr(), byte_size(c));
    p += byte_size(c);
  }
  return out;
}

const char* unpack(const char* src, std::vector<at::Tensor>& tensors) {
  for (auto& t : tensors) {
    const size_t n = byte_size(t);
    if (t.is_contiguous()) {
      std::memcpy(t.data_ptr(), src, n);
    } else {
      at::Tensor c = at::empty_like(t, at::MemoryFormat::Contiguous);
      std::memcpy(c.data_ptr(), src, n);
      t.copy_(c);
    }
    src += n;
  }
  return src;
}

}  // namespace strata_torch
