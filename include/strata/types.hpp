// Element types and reduction operators: one table each, shared by the C++ and C APIs,
// plans, kernels, strata-perf and the tests. Header-only, so tools that do not link
// libstrata (the perf peers) use the same names.
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
  float8_e4m3 = 10,  // OCP fp8: 4 exponent bits, 3 mantissa bits, no infinity, largest 448
  float8_e5m2 = 11,  // OCP fp8: 5 exponent bits, 2 mantissa bits, IEEE-like, largest 57344
};
inline constexpr int kNumDataTypes = 12;

// The numeric values match the C API's strataRedOp_t.
enum class ReduceOp : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };
inline constexpr int kNumReduceOps = 5;

struct DataTypeInfo {
  const char* name;  // nccl-tests' name
  size_t size;       // bytes per element
  bool floating;
  bool is_signed;
};
// Indexed by DataType.
inline constexpr DataTypeInfo kDataTypes[kNumDataTypes] = {
    {"int8", 1, false, true},      {"uint8", 1, false, false},   {"int32", 4, false, true},
    {"uint32", 4, false, false},   {"int64", 8, false, true},    {"uint64", 8, false, false},
    {"half", 2, true, true},       {"bfloat16", 2, true, true},  {"float", 4, true, true},
    {"double", 8, true, true},     {"f8e4m3", 1, true, true},    {"f8e5m2", 1, true, true},
};
// Indexed by ReduceOp.
inline constexpr const char* kReduceOpNames[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};

// Inline: every call checks and sizes its arguments.
inline bool is_valid(DataType t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumDataTypes; }
inline bool is_valid(ReduceOp op) { return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumReduceOps; }
inline size_t size_of(DataType t) { return is_valid(t) ? kDataTypes[static_cast<int>(t)].size : 0; }  // 0: invalid
inline bool is_floating(DataType t) { return is_valid(t) && kDataTypes[static_cast<int>(t)].floating; }
inline bool is_signed(DataType t) { return is_valid(t) && kDataTypes[static_cast<int>(t)].is_signed; }

// nccl-tests' names: "int8", "uint8", "int32", "uint32", "int64", "uint64",
// "half", "bfloat16", "float", "double", "f8e4m3", "f8e5m2"; "invalid" otherwise.
inline const char* name(DataType t) { return is_valid(t) ? kDataTypes[static_cast<int>(t)].name : "invalid"; }
inline const char* name(ReduceOp op) { return is_valid(op) ? kReduceOpNames[static_cast<int>(op)] : "invalid"; }

// Accepts the names above and common aliases ("fp32", "float32", "fp16", "bf16", "i8",
// "fp8_e4m3", "e5m2", ...).
inline std::optional<DataType> parse_datatype(std::string_view s) {
  struct Alias {
    std::string_view text;
    DataType type;
  };
  static constexpr Alias aliases[] = {
      {"char", DataType::int8},        {"i8", DataType::int8},          {"u8", DataType::uint8},
      {"int", DataType::int32},        {"i32", DataType::int32},        {"u32", DataType::uint32},
      {"i64", DataType::int64},        {"u64", DataType::uint64},       {"fp16", DataType::float16},
      {"float16", DataType::float16},  {"bf16", DataType::bfloat16},    {"fp32", DataType::float32},
      {"float32", DataType::float32},  {"fp64", DataType::float64},     {"float64", DataType::float64},
      {"fp8_e4m3", DataType::float8_e4m3}, {"float8_e4m3", DataType::float8_e4m3}, {"e4m3", DataType::float8_e4m3},
      {"fp8_e5m2", DataType::float8_e5m2}, {"float8_e5m2", DataType::float8_e5m2}, {"e5m2", DataType::float8_e5m2},
  };
  for (int i = 0; i < kNumDataTypes; ++i)
    if (s == kDataTypes[i].name) return static_cast<DataType>(i);
  for (const Alias& a : aliases)
    if (a.text == s) return a.type;
  return std::nullopt;
}

inline std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (int i = 0; i < kNumReduceOps; ++i)
    if (s == kReduceOpNames[i]) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

}  // namespace strata
