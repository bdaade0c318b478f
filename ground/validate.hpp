// Argument checks shared by the C++ and C APIs: each throws InvalidArgument naming the
// argument and the call.
#pragma once

#include <cstddef>

#include "strata/types.hpp"

namespace strata::check {

void type(const char* call, DataType t);
void op(const char* call, ReduceOp o);
void buffer(const char* call, const char* arg, const void* p, size_t count);
// count * size_of(t) * multiple must fit in memory's address range.
void count(const char* call, size_t count, DataType t, size_t multiple);
void root(const char* call, int root, int nranks);
void peer(const char* call, int peer, int nranks);
// The two ranges either coincide exactly (in place, as the call defines it) or are disjoint.
void in_place_or_disjoint(const char* call, const void* in, size_t in_bytes, const void* out, size_t out_bytes,
                          const void* in_place_out);

}  // namespace strata::check
