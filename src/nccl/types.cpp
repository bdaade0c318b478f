#include "types.hpp"

#include <string>

#include "strata/error.hpp"

namespace strata_nccl {

namespace {

// Indexed by ncclDataType_t; each row names Strata's type by its table name
// (include/strata/types.hpp), so a type Strata gains is found without a change here.
struct TypeRow {
  ncclDataType_t nccl;
  const char* nccl_name;
  const char* strata_name;
};
constexpr TypeRow kTypes[] = {
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
constexpr bool rows_in_order() {
  for (int i = 0; i < ncclNumTypes; ++i)
    if (kTypes[i].nccl != i) return false;
  return true;
}
static_assert(rows_in_order(), "kTypes is indexed by ncclDataType_t");

struct OpRow {
  ncclRedOp_t nccl;
  const char* strata_name;
};
constexpr OpRow kOps[] = {{ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"}, {ncclMin, "min"}, {ncclAvg, "avg"}};
static_assert(sizeof kOps / sizeof kOps[0] == ncclNumOps, "one row per built-in NCCL operator");

bool known(ncclDataType_t t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < ncclNumTypes; }

}  // namespace

const char* name(ncclDataType_t type) { return known(type) ? kTypes[type].nccl_name : "an invalid ncclDataType_t"; }

strata::DataType data_type(ncclDataType_t type) {
  if (!known(type))
    throw strata::InvalidArgument("datatype " + std::to_string(static_cast<int>(type)) +
                                  " is not an ncclDataType_t (0 .. " + std::to_string(ncclNumTypes - 1) + ")");
  const TypeRow& row = kTypes[type];
  if (auto t = strata::parse_datatype(row.strata_name)) return *t;
  throw strata::InvalidArgument(std::string(row.nccl_name) + " is not supported by this build of Strata (it has no " +
                                row.strata_name + " type yet)");
}

std::optional<strata::ReduceOp> builtin_op(ncclRedOp_t op) {
  for (const OpRow& row : kOps)
    if (row.nccl == op) return strata::parse_reduce_op(row.strata_name);
  return std::nullopt;
}

}  // namespace strata_nccl
