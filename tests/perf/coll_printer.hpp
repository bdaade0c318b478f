// gtest prints perf::Coll (a std::variant, which gtest prints through its alternatives)
// by name rather than as bytes. Found by argument-dependent lookup.
#pragma once

#include <ostream>

#include "timed_op.hpp"

namespace strata {
inline void PrintTo(Collective c, std::ostream* os) { *os << name(c); }
}  // namespace strata

namespace perf {
inline void PrintTo(P2p p, std::ostream* os) { *os << name(p); }
}  // namespace perf
