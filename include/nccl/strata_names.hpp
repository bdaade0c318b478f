// NCCL's element types and reduction operators with the names Strata's tables give them
// (include/strata/types.hpp), one row each, indexed by NCCL's value. Header-only: shared by
// libnccl.so.2 (src/nccl) and strata-perf's nccl backend, which look types up by these
// names in either direction, so a type Strata gains (the fp8 ones) is found with no change.
#pragma once

#include <array>
#include <cstddef>
#include <optional>

#include "nccl/nccl.h"
#include "strata/types.hpp"

namespace strata::nccl_names {

struct TypeRow {
  ncclDataType_t nccl;
  const char* nccl_name;
  const char* strata_name;
};
inline constexpr TypeRow kTypes[] = {
    {ncclInt8, "ncclInt8", "int8"},
    {ncclUint8, "ncclUint8", "uint8"},
    {ncclInt32, "ncclInt32", "int32"},
    {ncclUint32, "ncclUint32", "uint32"},
    {ncclInt64, "ncclInt64", "int64"},
    {ncclUint64, "ncclUint64", "uint64"},
    {ncclFloat16, "ncclFloat16", "half"},
    {ncclFloat32, "ncclFloat32", "float"},
    {ncclFloat64, "ncclFloat64", "double"},
    {ncclBfloat16, "ncclBfloat16", "bfloat16"},
    {ncclFloat8e4m3, "ncclFloat8e4m3", "f8e4m3"},
    {ncclFloat8e5m2, "ncclFloat8e5m2", "f8e5m2"},
};
static_assert(sizeof kTypes / sizeof kTypes[0] == ncclNumTypes, "one row per NCCL type");

struct OpRow {
  ncclRedOp_t nccl;
  const char* strata_name;
};
inline constexpr OpRow kOps[] = {{ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"}, {ncclMin, "min"}, {ncclAvg, "avg"}};
static_assert(sizeof kOps / sizeof kOps[0] == ncclNumOps, "one row per built-in NCCL operator");

constexpr bool rows_in_order() {
  for (int i = 0; i < ncclNumTypes; ++i)
    if (kTypes[i].nccl != i) return false;
  for (int i = 0; i < ncclNumOps; ++i)
    if (kOps[i].nccl != i) return false;
  return true;
}
static_assert(rows_in_order(), "the rows are indexed by NCCL's values");

// Strata's value for each row, found by its name once (`parse`: strata::parse_datatype or
// parse_reduce_op), indexed by NCCL's value; nullopt where Strata has none.
template <typename T, typename Row, size_t N, typename Parse>
std::array<std::optional<T>, N> by_name(const Row (&rows)[N], Parse&& parse) {
  std::array<std::optional<T>, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = parse(rows[i].strata_name);
  return out;
}

inline const std::array<std::optional<DataType>, ncclNumTypes>& strata_types() {
  static const auto table = by_name<DataType>(kTypes, [](const char* s) { return parse_datatype(s); });
  return table;
}
inline const std::array<std::optional<ReduceOp>, ncclNumOps>& strata_ops() {
  static const auto table = by_name<ReduceOp>(kOps, [](const char* s) { return parse_reduce_op(s); });
  return table;
}

}  // namespace strata::nccl_names
