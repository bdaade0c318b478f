#include "algorithms/outer_layout.hpp"

#include <algorithm>
#include <numeric>

#include "strata/error.hpp"
#include "strata/wire_format.hpp"

namespace strata {

Islands find_islands(const Hierarchy& h, int requested) {
  const int n = h.nranks;
  const std::vector<int> top = h.levels.empty() ? std::vector<int>(n, 0) : h.levels.back().group;
  Islands is;
  if (requested == 0) {
    is.island = top;
    is.count = *std::max_element(top.begin(), top.end()) + 1;
  } else {
    if (requested < 0 || n % requested != 0)
      throw InvalidArgument("outer sync: " + std::to_string(requested) + " islands do not divide " +
                            std::to_string(n) + " ranks into equal islands");
    is.count = requested;
    for (int r = 0; r < n; ++r) is.island.push_back(r / (n / requested));
    // Ranks that share a group of the outermost level must share an island, or the
    // inner traffic would cross the slow link (one group: no slow link to respect).
    const bool levels = *std::max_element(top.begin(), top.end()) > 0;
    for (int r = 0; r < n && levels; ++r)
      for (int q = 0; q < r; ++q)
        if (top[q] == top[r] && is.island[q] != is.island[r])
          throw InvalidArgument("outer sync: " + std::to_string(requested) + " islands of consecutive ranks split " +
                                "a group of the hierarchy's outermost level (ranks " + std::to_string(q) + " and " +
                                std::to_string(r) + "); hierarchy: " + h.describe());
  }
  std::vector<int> sizes(static_cast<size_t>(is.count), 0);
  for (int r = 0; r < n; ++r) is.local.push_back(sizes[static_cast<size_t>(is.island[r])]++);
  is.size = sizes[0];
  for (int s : sizes)
    if (s != is.size)
      throw InvalidArgument("outer sync: islands must have equal sizes (every island rank carries one share); the "
                            "hierarchy's outermost level has groups of " + std::to_string(is.size) + " and " +
                            std::to_string(s) + " ranks: " + h.describe());
  return is;
}

OuterLayout outer_layout(size_t count, const std::vector<size_t>& segments, int fragments, int islands,
                         int island_size, int every) {
  if (count == 0) throw InvalidArgument("outer sync: the parameter count is 0");
  if (fragments < 1) throw InvalidArgument("outer sync: fragments must be at least 1");
  std::vector<size_t> segs = segments;
  if (segs.empty()) {
    for (int p = 0; p < fragments; ++p)
      segs.push_back(count / fragments + (static_cast<size_t>(p) < count % fragments ? 1 : 0));
  }
  if (std::accumulate(segs.begin(), segs.end(), size_t{0}) != count)
    throw InvalidArgument("outer sync: the segment lengths sum to " +
                          std::to_string(std::accumulate(segs.begin(), segs.end(), size_t{0})) + ", not the count " +
                          std::to_string(count));
  if (static_cast<size_t>(fragments) > segs.size())
    throw InvalidArgument("outer sync: " + std::to_string(fragments) + " fragments but only " +
                          std::to_string(segs.size()) + " segments (each fragment needs one)");
  OuterLayout l;
  l.fragments.resize(static_cast<size_t>(fragments));
  size_t at = 0;
  for (size_t j = 0; j < segs.size(); ++j) {
    Fragment& f = l.fragments[j % static_cast<size_t>(fragments)];
    f.ranges.push_back({at, segs[j]});
    f.real += segs[j];
    at += segs[j];
  }
  const size_t quantum = static_cast<size_t>(islands) * static_cast<size_t>(island_size) * kWireBlock;
  for (size_t p = 0; p < l.fragments.size(); ++p) {
    Fragment& f = l.fragments[p];
    f.padded = (f.real + quantum - 1) / quantum * quantum;
    f.packed = l.packed_size;
    f.share = f.padded / static_cast<size_t>(island_size);
    f.share_at = l.share_size;
    f.first = static_cast<long long>(p + 1) * every / fragments;
    l.packed_size += f.padded;
    l.share_size += f.share;
  }
  return l;
}

void for_each_run(const Fragment& f, size_t begin, size_t end,
                  const std::function<void(size_t buffer, size_t packed, size_t len)>& fn) {
  size_t packed = 0;
  for (const BufferRange& r : f.ranges) {
    const size_t lo = std::max(begin, packed), hi = std::min(end, packed + r.len);
    if (lo < hi) fn(r.offset + (lo - packed), lo, hi - lo);
    packed += r.len;
    if (packed >= end) break;
  }
}

}  // namespace strata
