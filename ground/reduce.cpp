#include "ground/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "ground/device/functors.hpp"
#include "ground/log.hpp"
#include "ground/settings.hpp"

namespace strata {

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
  elementwise::with_element(type, [&](auto e) {
    using E = decltype(e);
    auto* p = static_cast<typename E::Storage*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = elementwise::divide<E>(p[i], nranks);
  });
}

}  // namespace strata
