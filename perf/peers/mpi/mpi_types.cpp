#include "mpi_types.hpp"

#include <cstdint>
#include <cstring>

#include "numeric.hpp"

namespace perf {

namespace {

// The user functions are plain C callbacks; they tell half from bfloat16 by datatype.
MPI_Datatype g_half = MPI_DATATYPE_NULL;
MPI_Datatype g_bf16 = MPI_DATATYPE_NULL;

template <class F>
void combine(void* in, void* inout, int* len, MPI_Datatype* dt, F f) {
  const bool half = *dt == g_half;
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = half ? half_to_float(a[i]) : bf16_to_float(a[i]);
    const float y = half ? half_to_float(b[i]) : bf16_to_float(b[i]);
    const float r = f(x, y);
    b[i] = half ? float_to_half(r) : float_to_bf16(r);
  }
}

void sum16(void* in, void* inout, int* len, MPI_Datatype* dt) {
  combine(in, inout, len, dt, [](float x, float y) { return x + y; });
}
void prod16(void* in, void* inout, int* len, MPI_Datatype* dt) {
  combine(in, inout, len, dt, [](float x, float y) { return x * y; });
}
void max16(void* in, void* inout, int* len, MPI_Datatype* dt) {
  combine(in, inout, len, dt, [](float x, float y) { return x > y ? x : y; });
}
void min16(void* in, void* inout, int* len, MPI_Datatype* dt) {
  combine(in, inout, len, dt, [](float x, float y) { return x < y ? x : y; });
}

}  // namespace

MpiTypes::MpiTypes() {
  MPI_Type_contiguous(1, MPI_UINT16_T, &g_half);
  MPI_Type_commit(&g_half);
  MPI_Type_contiguous(1, MPI_UINT16_T, &g_bf16);
  MPI_Type_commit(&g_bf16);
  MPI_User_function* fns[4] = {sum16, prod16, max16, min16};
  for (int i = 0; i < 4; ++i) MPI_Op_create(fns[i], /*commute=*/1, &user_ops_[i]);
}

MpiTypes::~MpiTypes() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& op : user_ops_)
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
  if (g_half != MPI_DATATYPE_NULL) MPI_Type_free(&g_half);
  if (g_bf16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_bf16);
}

MPI_Datatype MpiTypes::datatype(DataType t, bool reduction) const {
  switch (t) {
    case DataType::int8: return MPI_INT8_T;
    case DataType::uint8: return MPI_UINT8_T;
    case DataType::int32: return MPI_INT32_T;
    case DataType::uint32: return MPI_UINT32_T;
    case DataType::int64: return MPI_INT64_T;
    case DataType::uint64: return MPI_UINT64_T;
    case DataType::float16: return reduction ? g_half : MPI_UINT16_T;
    case DataType::bfloat16: return reduction ? g_bf16 : MPI_UINT16_T;
    case DataType::float32: return MPI_FLOAT;
    case DataType::float64: return MPI_DOUBLE;
    case DataType::float8_e4m3:
    case DataType::float8_e5m2: return MPI_UINT8_T;  // moved only: strata-perf refuses fp8 reductions
  }
  return MPI_BYTE;
}

MPI_Op MpiTypes::op(DataType t, ReduceOp op) const {
  const bool is16 = t == DataType::float16 || t == DataType::bfloat16;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return is16 ? user_ops_[0] : MPI_SUM;
    case ReduceOp::prod: return is16 ? user_ops_[1] : MPI_PROD;
    case ReduceOp::max: return is16 ? user_ops_[2] : MPI_MAX;
    case ReduceOp::min: return is16 ? user_ops_[3] : MPI_MIN;
  }
  return MPI_SUM;
}

}  // namespace perf
