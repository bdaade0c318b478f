// NCCL's element types and reduction operators onto Strata's, through the table of
// include/nccl/strata_names.hpp.
#pragma once

#include <optional>

#include "nccl/nccl.h"
#include "strata/types.hpp"

namespace strata_nccl {

// "ncclFloat32", ...; "an invalid ncclDataType_t" outside the enumeration.
const char* name(ncclDataType_t type);
// Strata's type for `type`. InvalidArgument, naming it, for a value outside the enumeration
// or a type this build of Strata does not have (the fp8 types until Strata's DataType
// gains them: the table then finds them by name, with no change here).
strata::DataType data_type(ncclDataType_t type);
// Strata's operator for a built-in ncclRedOp_t (sum ... avg); nullopt for any other value
// (a pre-multiplied sum's, or garbage: the communicator knows which).
std::optional<strata::ReduceOp> builtin_op(ncclRedOp_t op);

}  // namespace strata_nccl
