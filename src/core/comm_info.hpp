// What a communicator chose, for tools (strata-topo): not part of the public API.
#pragma once

#include <string>

#include "strata/strata.hpp"

namespace strata {

// The hierarchy: levels, their groups of ranks and link models.
std::string describe_hierarchy(const Comm& c);
// This rank's host identity and the transport to each peer ("1:shm 2:tcp ...").
std::string describe_links(const Comm& c);

}  // namespace strata
