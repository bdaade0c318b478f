#include "types.hpp"

#include <string>

#include "nccl/strata_names.hpp"
#include "strata/error.hpp"

namespace strata_nccl {

namespace {
namespace names = strata::nccl_names;
bool known(ncclDataType_t t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < ncclNumTypes; }
}  // namespace

const char* name(ncclDataType_t type) {
  return known(type) ? names::kTypes[type].nccl_name : "an invalid ncclDataType_t";
}

strata::DataType data_type(ncclDataType_t type) {
  if (!known(type))
    throw strata::InvalidArgument("datatype " + std::to_string(static_cast<int>(type)) +
                                  " is not an ncclDataType_t (0 .. " + std::to_string(ncclNumTypes - 1) + ")");
  if (auto t = names::strata_types()[type]) return *t;
  const names::TypeRow& row = names::kTypes[type];
  throw strata::InvalidArgument(std::string(row.nccl_name) + " is not supported by this build of Strata (it has no " +
                                row.strata_name + " type yet)");
}

std::optional<strata::ReduceOp> builtin_op(ncclRedOp_t op) {
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= ncclNumOps) return std::nullopt;
  return names::strata_ops()[op];
}

}  // namespace strata_nccl
