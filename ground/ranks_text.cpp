#include "ground/ranks_text.hpp"

namespace strata {

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.empty()) return "no ranks";
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (i ? ", " : "") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

}  // namespace strata
