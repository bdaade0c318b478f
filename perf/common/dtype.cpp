#include "dtype.hpp"

#include <array>
#include <utility>

namespace perf {

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::int8,  DType::uint8,   DType::int32,    DType::uint32,
                                       DType::int64, DType::uint64,  DType::half,     DType::float32,
                                       DType::float64, DType::bfloat16};
  return v;
}

const std::vector<RedOp>& all_redops() {
  static const std::vector<RedOp> v = {RedOp::sum, RedOp::prod, RedOp::max, RedOp::min, RedOp::avg};
  return v;
}

const char* name(DType t) {
  switch (t) {
    case DType::int8: return "int8";
    case DType::uint8: return "uint8";
    case DType::int32: return "int32";
    case DType::uint32: return "uint32";
    case DType::int64: return "int64";
    case DType::uint64: return "uint64";
    case DType::half: return "half";
    case DType::bfloat16: return "bfloat16";
    case DType::float32: return "float";
    case DType::float64: return "double";
  }
  return "?";
}

const char* name(RedOp op) {
  switch (op) {
    case RedOp::sum: return "sum";
    case RedOp::prod: return "prod";
    case RedOp::max: return "max";
    case RedOp::min: return "min";
    case RedOp::avg: return "avg";
  }
  return "?";
}

size_t size_of(DType t) {
  switch (t) {
    case DType::int8:
    case DType::uint8: return 1;
    case DType::half:
    case DType::bfloat16: return 2;
    case DType::int32:
    case DType::uint32:
    case DType::float32: return 4;
    case DType::int64:
    case DType::uint64:
    case DType::float64: return 8;
  }
  return 0;
}

bool is_floating(DType t) {
  return t == DType::half || t == DType::bfloat16 || t == DType::float32 || t == DType::float64;
}

bool is_signed(DType t) {
  return t == DType::int8 || t == DType::int32 || t == DType::int64 || is_floating(t);
}

std::optional<DType> parse_dtype(std::string_view s) {
  static const std::array<std::pair<std::string_view, DType>, 24> names = {{
      {"int8", DType::int8},        {"char", DType::int8},         {"uint8", DType::uint8},
      {"int32", DType::int32},      {"int", DType::int32},         {"uint32", DType::uint32},
      {"int64", DType::int64},      {"uint64", DType::uint64},     {"half", DType::half},
      {"float16", DType::half},     {"fp16", DType::half},         {"bfloat16", DType::bfloat16},
      {"bf16", DType::bfloat16},    {"float", DType::float32},     {"float32", DType::float32},
      {"fp32", DType::float32},     {"double", DType::float64},    {"float64", DType::float64},
      {"fp64", DType::float64},     {"i8", DType::int8},           {"u8", DType::uint8},
      {"i32", DType::int32},        {"i64", DType::int64},         {"u64", DType::uint64},
  }};
  for (const auto& [n, t] : names)
    if (n == s) return t;
  return std::nullopt;
}

std::optional<RedOp> parse_redop(std::string_view s) {
  for (RedOp op : all_redops())
    if (s == name(op)) return op;
  return std::nullopt;
}

}  // namespace perf
