// gtest prints a perf::Coll by name (found by argument-dependent lookup: perf is one of
// the variant's namespaces).
#pragma once

#include <ostream>

#include "collective.hpp"

namespace perf {

inline void PrintTo(const Coll& c, std::ostream* os) { *os << name(c); }

}  // namespace perf
