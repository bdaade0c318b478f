// Who owns what in an outer synchronisation (include/strata/outer_sync.hpp): which
// ranks form the islands, how the parameter buffer is cut into fragments, each fragment
// into one share per island rank and each share into one piece per island, and when
// each fragment is exchanged. Pure data, like a plan: no communicator, no sockets.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/hierarchy.hpp"

namespace strata {

// The islands of a communicator: island of every rank and its index inside the island.
struct Islands {
  int count = 1;               // K
  int size = 1;                // g: ranks per island
  std::vector<int> island;     // per rank
  std::vector<int> local;      // per rank: position in its island (rank order)
};

// requested == 0: the groups of the hierarchy's outermost level; K > 0: K islands of
// consecutive ranks, each of which must be a union of those groups. Islands must be of
// equal size. Throws InvalidArgument saying why not.
Islands find_islands(const Hierarchy& h, int requested);

struct BufferRange {
  size_t offset;  // in the caller's buffer
  size_t len;
};

// One fragment in "packed" order: its segments back to back, then zero padding up to a
// multiple of g·K·kWireBlock, so that it splits into g equal shares and each share into
// K equal pieces of whole wire blocks.
struct Fragment {
  std::vector<BufferRange> ranges;
  size_t real = 0;       // elements of the caller's buffer
  size_t padded = 0;     // elements in packed order
  size_t packed = 0;     // where it starts in the packed order (snapshot)
  size_t share = 0;      // padded / g
  size_t share_at = 0;   // where this fragment's share starts in a rank's share buffers
  long long first = 0;   // o_p: the first step at which it is exchanged
};

struct OuterLayout {
  std::vector<Fragment> fragments;
  size_t packed_size = 0;  // sum of padded
  size_t share_size = 0;   // sum of share
};

// segments: lengths summing to count (empty: `fragments` near-equal pieces); segment j
// goes to fragment j mod F. A segment may be empty (a rank holding part of a model passes
// the model's segments with 0 for those it lacks, so that fragment j mod F means the same
// layers on every rank); a fragment with no elements has padded size 0. Throws
// InvalidArgument for an impossible cut.
OuterLayout outer_layout(size_t count, const std::vector<size_t>& segments, int fragments, int islands,
                         int island_size, int every);

// Visits the real elements of packed range [begin, end) of fragment f (offsets relative
// to the fragment): fn(buffer offset, packed offset, length) for each run.
void for_each_run(const Fragment& f, size_t begin, size_t end,
                  const std::function<void(size_t buffer, size_t packed, size_t len)>& fn);

// The schedule: fragment f is exchanged at steps first, first + every, ...
inline bool exchanged_at(const Fragment& f, long long step, int every) {
  return step >= f.first && (step - f.first) % every == 0;
}
// The last step <= `step` at which f was exchanged, or -1.
inline long long last_exchange(const Fragment& f, long long step, int every) {
  return step < f.first ? -1 : step - (step - f.first) % every;
}

}  // namespace strata
