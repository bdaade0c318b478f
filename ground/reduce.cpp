#include "ground/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "ground/half.hpp"
#include "ground/log.hpp"
#include "ground/settings.hpp"

namespace strata {

namespace {

template <typename T>
void divide(void* buf, size_t n, int by) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(by));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide16(void* buf, size_t n, int by) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / static_cast<float>(by));
}

}  // namespace

namespace generic {
ReduceFn reduce_fn(DataType type, ReduceOp op);
}
namespace avx2 {
ReduceFn reduce_fn(DataType type, ReduceOp op);
}

bool use_avx2() {
  // STRATA_REDUCE_ISA=generic forces the baseline kernels (for comparison and testing).
  // A malformed value is refused by every communicator's creation (settings::check_all);
  // here, read once by whatever reduces first, it falls back to the CPU's choice.
  static const bool yes = [] {
    std::string isa;
    try {
      isa = settings::text("STRATA_REDUCE_ISA");
    } catch (const std::exception& e) {
      STRATA_WARN("%s; choosing the kernels by CPU", e.what());
    }
    if (isa == "generic") return false;
    __builtin_cpu_init();
    // F16C from CPUID (leaf 1, ECX): clang's __builtin_cpu_supports does not know "f16c".
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    return __builtin_cpu_supports("avx2") && f16c;
  }();
  return yes;
}

ReduceFn reduce_fn(DataType type, ReduceOp op) {
  return use_avx2() ? avx2::reduce_fn(type, op) : generic::reduce_fn(type, op);
}

void finalize(void* buf, size_t count, DataType type, ReduceOp op, int nranks) {
  if (!has_finalize(op) || nranks == 1) return;
  switch (type) {
    case DataType::int8: return divide<int8_t>(buf, count, nranks);
    case DataType::uint8: return divide<uint8_t>(buf, count, nranks);
    case DataType::int32: return divide<int32_t>(buf, count, nranks);
    case DataType::uint32: return divide<uint32_t>(buf, count, nranks);
    case DataType::int64: return divide<int64_t>(buf, count, nranks);
    case DataType::uint64: return divide<uint64_t>(buf, count, nranks);
    case DataType::float16: return divide16<half_to_float, float_to_half>(buf, count, nranks);
    case DataType::bfloat16: return divide16<bf16_to_float, float_to_bf16>(buf, count, nranks);
    case DataType::float32: return divide<float>(buf, count, nranks);
    case DataType::float64: return divide<double>(buf, count, nranks);
  }
}

}  // namespace strata
