// What the backend needs to know about a torch tensor: whether Strata can take it, its
// element type and operator in Strata's terms, and host buffers for tensors that are not
// one contiguous block (staged: copied in before the call, copied back after it).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <strata/strata.hpp>

namespace strata_torch {

// A clear error for what Strata cannot take: a tensor that is not dense host memory (CUDA
// waits for the library's device path), or, for `call`, a list of other than one tensor.
void check_host_dense(const at::Tensor& t, const char* call);
at::Tensor& single_tensor(std::vector<at::Tensor>& tensors, const char* call);
// The same element count and type as `like`, as every rank's block of a collective must have.
void check_same_shape(const at::Tensor& t, const at::Tensor& like, const char* call);

// The element type a reduction runs on. Data movement needs no type: it moves bytes.
strata::DataType reduction_type(const at::Tensor& t, const c10d::ReduceOp& op, const char* call);
strata::ReduceOp reduction_op(const c10d::ReduceOp& op, const char* call);

inline size_t byte_size(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// A tensor as one contiguous host buffer: the tensor itself when it is contiguous, else a
// contiguous copy that `copy_back()` writes into the caller's tensor after the call.
struct Staged {
  at::Tensor user, buffer;
  explicit Staged(const at::Tensor& t);
  void* data() const { return buffer.data_ptr(); }
  void copy_back() const;
};

// Several tensors packed end to end in one byte buffer, and unpacked from one.
at::Tensor pack(const std::vector<at::Tensor>& tensors);
size_t total_bytes(const std::vector<at::Tensor>& tensors);
// Writes `tensors` from the bytes at `src` (packed as pack() packs them); returns the end.
const char* unpack(const char* src, std::vector<at::Tensor>& tensors);

}  // namespace strata_torch
