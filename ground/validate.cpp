#include "ground/validate.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/error.hpp"

namespace strata::check {

void type(const char* call, DataType t) {
  if (!is_valid(t)) throw InvalidArgument(std::string(call) + ": unknown data type " + std::to_string(static_cast<int>(t)));
}

void op(const char* call, ReduceOp o) {
  if (!is_valid(o)) throw InvalidArgument(std::string(call) + ": unknown reduction op " + std::to_string(static_cast<int>(o)));
}

void buffer(const char* call, const char* arg, const void* p, size_t count) {
  if (!p && count > 0) throw InvalidArgument(std::string(call) + ": " + arg + " is null with count " + std::to_string(count));
}

void count(const char* call, size_t count, DataType t, size_t multiple) {
  // A multiplication, not a division by the limit: this runs on every call.
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, size_of(t) * std::max<size_t>(multiple, 1), &bytes) ||
      bytes > static_cast<size_t>(PTRDIFF_MAX))
    throw InvalidArgument(std::string(call) + ": count " + std::to_string(count) + " of " + name(t) +
                          " is larger than any buffer can be");
}

void root(const char* call, int root, int nranks) {
  if (root < 0 || root >= nranks)
    throw InvalidArgument(std::string(call) + ": root " + std::to_string(root) + " is not a rank of this communicator (size " +
                          std::to_string(nranks) + ")");
}

void peer(const char* call, int peer, int nranks) {
  if (peer < 0 || peer >= nranks)
    throw InvalidArgument(std::string(call) + ": peer " + std::to_string(peer) + " is not a rank of this communicator (size " +
                          std::to_string(nranks) + ")");
}

void in_place_or_disjoint(const char* call, const void* in, size_t in_bytes, const void* out, size_t out_bytes,
                          const void* in_place_out) {
  if (!in || !out || in_bytes == 0 || out_bytes == 0) return;
  if (out == in_place_out) return;
  auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
  if (a < b + out_bytes && b < a + in_bytes)
    throw InvalidArgument(std::string(call) + ": send and receive buffers overlap but are not in place");
}

}  // namespace strata::check
