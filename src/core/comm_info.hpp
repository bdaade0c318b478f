// What a communicator chose, for tools (strata-topo): not part of the public API.
#pragma once

#include <map>
#include <string>

#include "strata/strata.hpp"

namespace strata {

// The hierarchy: levels, their groups of ranks and link models.
std::string describe_hierarchy(const Comm& c);
// This rank's host identity and the transport to each peer ("1:shm 2:tcp ..."). Connects
// every pair first (collective: every rank calls it), which a communicator otherwise does
// only on need.
std::string describe_links(Comm& c);

// What this rank holds now: the peers it has a control connection to, and its host links
// by transport ("shm", "tcp", ...). Connects nothing.
struct Connections {
  int control = 0;
  std::map<std::string, int> host_links;
};
Connections connections(const Comm& c);

}  // namespace strata
