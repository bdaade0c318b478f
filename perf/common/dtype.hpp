// Element types and reduction operators as nccl-tests names them. perf_common keeps its
// own copies so that it does not depend on libstrata (peer drivers link it too).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace perf {

enum class DType { int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float32, float64 };
enum class RedOp { sum, prod, max, min, avg };

// nccl-tests' order for `-d all` / `-o all`.
const std::vector<DType>& all_dtypes();
const std::vector<RedOp>& all_redops();

const char* name(DType t);  // "int8" ... "half", "bfloat16", "float", "double"
const char* name(RedOp op);  // "sum", "prod", "max", "min", "avg"
size_t size_of(DType t);
bool is_floating(DType t);
bool is_signed(DType t);

// Accepts nccl-tests' names plus a few aliases (char, int, float32, fp16, bf16, ...).
std::optional<DType> parse_dtype(std::string_view s);
std::optional<RedOp> parse_redop(std::string_view s);

}  // namespace perf
