// strata::scale (include/strata/strata.hpp): the prod reduction kernel against a block of
// copies of the factor, so scaling rounds exactly as a product reduction does, for every
// type the kernels know.
#include <algorithm>
#include <cstring>

#include "ground/reduce.hpp"
#include "strata/error.hpp"
#include "strata/strata.hpp"

namespace strata {

void scale(void* dst, const void* src, size_t count, DataType type, const void* factor) {
  if (!is_valid(type)) throw InvalidArgument("scale: unknown data type " + std::to_string(static_cast<int>(type)));
  if (count == 0) return;
  if (!dst || !src || !factor) throw InvalidArgument("scale: a null dst, src or factor with count > 0");
  const size_t esz = size_of(type);
  alignas(64) std::byte factors[4096];
  const size_t per_block = sizeof factors / esz;
  for (size_t i = 0; i < per_block; ++i) std::memcpy(factors + i * esz, factor, esz);
  const ReduceFn prod = reduce_fn(type, ReduceOp::prod);
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  for (size_t done = 0; done < count; done += per_block) {
    const size_t n = std::min(per_block, count - done);
    prod(d + done * esz, s + done * esz, factors, n);
  }
}

}  // namespace strata
