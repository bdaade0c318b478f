// Element types and reduction operators shared by the C++ API, plans and kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

// The numeric values match the C API's strataDataType_t.
enum class DataType : int {
  int8 = 0,
  uint8 = 1,
  int32 = 2,
  uint32 = 3,
  int64 = 4,
  uint64 = 5,
  float16 = 6,
  bfloat16 = 7,
  float32 = 8,
  float64 = 9,
};
inline constexpr int kNumDataTypes = 10;

// The numeric values match the C API's strataRedOp_t.
enum class ReduceOp : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };
inline constexpr int kNumReduceOps = 5;

// Inline: every call checks and sizes its arguments.
inline bool is_valid(DataType t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumDataTypes; }
inline bool is_valid(ReduceOp op) { return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumReduceOps; }
inline size_t size_of(DataType t) {  // bytes per element; 0 for an invalid type
  static constexpr size_t sizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return is_valid(t) ? sizes[static_cast<int>(t)] : 0;
}
bool is_floating(DataType t);

// nccl-tests' names: "int8", "uint8", "int32", "uint32", "int64", "uint64",
// "half", "bfloat16", "float", "double".
const char* name(DataType t);
const char* name(ReduceOp op);  // "sum", "prod", "max", "min", "avg"

// Accepts the names above and common aliases ("fp32", "float32", "fp16", "bf16", ...).
std::optional<DataType> parse_datatype(std::string_view s);
std::optional<ReduceOp> parse_reduce_op(std::string_view s);

}  // namespace strata
