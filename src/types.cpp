#include "strata/types.hpp"

#include <string>

namespace strata {

bool is_floating(DataType t) {
  return t == DataType::float16 || t == DataType::bfloat16 || t == DataType::float32 ||
         t == DataType::float64;
}

const char* name(DataType t) {
  static constexpr const char* names[kNumDataTypes] = {"int8",  "uint8",    "int32", "uint32", "int64",
                                                       "uint64", "half", "bfloat16", "float", "double"};
  return is_valid(t) ? names[static_cast<int>(t)] : "invalid";
}

const char* name(ReduceOp op) {
  static constexpr const char* names[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};
  return is_valid(op) ? names[static_cast<int>(op)] : "invalid";
}

std::optional<DataType> parse_datatype(std::string_view s) {
  struct Alias {
    std::string_view text;
    DataType type;
  };
  static constexpr Alias aliases[] = {
      {"int8", DataType::int8},         {"char", DataType::int8},         {"uint8", DataType::uint8},
      {"int32", DataType::int32},       {"int", DataType::int32},         {"uint32", DataType::uint32},
      {"int64", DataType::int64},       {"uint64", DataType::uint64},     {"half", DataType::float16},
      {"fp16", DataType::float16},      {"float16", DataType::float16},   {"bfloat16", DataType::bfloat16},
      {"bf16", DataType::bfloat16},     {"float", DataType::float32},     {"fp32", DataType::float32},
      {"float32", DataType::float32},   {"double", DataType::float64},    {"fp64", DataType::float64},
      {"float64", DataType::float64},
  };
  for (const Alias& a : aliases)
    if (a.text == s) return a.type;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (int i = 0; i < kNumReduceOps; ++i)
    if (s == name(static_cast<ReduceOp>(i))) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

}  // namespace strata
