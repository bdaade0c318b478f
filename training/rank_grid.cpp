#include "rank_grid.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "errors.hpp"

namespace strata::train {

std::array<Dim, 3> parse_grid_order(const std::string& text) {
  std::vector<std::string> items;
  size_t from = 0;
  for (size_t comma; (comma = text.find(',', from)) != std::string::npos; from = comma + 1)
    items.push_back(text.substr(from, comma - from));
  items.push_back(text.substr(from));
  std::array<Dim, 3> order{};
  std::set<int> seen;
  for (size_t i = 0; i < items.size() && items.size() == 3; ++i)
    for (int d = 0; d < 3; ++d)
      if (items[i] == kDimNames[d] && seen.insert(d).second) order[i] = static_cast<Dim>(d);
  if (seen.size() != 3)
    throw TrainError("--layout needs tp, pp and dp once each, innermost first (e.g. tp,pp,dp), got '" +
                     text + "'");
  return order;
}

std::string grid_order_text(const std::array<Dim, 3>& order) {
  return std::string(kDimNames[order[0]]) + "," + kDimNames[order[1]] + "," + kDimNames[order[2]];
}

RankGrid::RankGrid(const GridShape& shape, const std::vector<GridLevel>& levels)
    : shape_(shape), levels_(levels) {
  const int n = shape.ranks();
  // The hierarchy's order: outermost group first, then inner groups, then rank.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    for (auto l = levels_.rbegin(); l != levels_.rend(); ++l)
      if (l->group[a] != l->group[b]) return l->group[a] < l->group[b];
    return a < b;
  });
  coords_.assign(n, {0, 0, 0});
  rank_of_.assign(n, 0);
  for (int pos = 0; pos < n; ++pos) {
    int rest = pos;
    std::array<int, 3>& c = coords_[order[pos]];
    for (Dim d : shape.order) {
      c[d] = rest % shape.size[d];
      rest /= shape.size[d];
    }
    rank_of_[c[kTp] + shape.size[kTp] * (c[kPp] + shape.size[kPp] * c[kDp])] = order[pos];
  }
}

int RankGrid::rank_at(int tp, int pp, int dp) const {
  return rank_of_[tp + shape_.size[kTp] * (pp + shape_.size[kPp] * dp)];
}

std::vector<int> RankGrid::group(Dim d, int rank) const {
  std::vector<int> out;
  std::array<int, 3> c = coords_[rank];
  for (int i = 0; i < shape_.size[d]; ++i) {
    c[d] = i;
    out.push_back(rank_at(c[kTp], c[kPp], c[kDp]));
  }
  return out;
}

int RankGrid::group_index(Dim d, int rank) const {
  // The coordinates other than d, as one number.
  int index = 0, scale = 1;
  for (int e = 0; e < 3; ++e) {
    if (e == d) continue;
    index += coords_[rank][e] * scale;
    scale *= shape_.size[e];
  }
  return index;
}

std::string RankGrid::placement(const std::vector<int>& ranks) const {
  if (ranks.size() < 2) return "one rank";
  auto together = [&](const GridLevel& l) {
    for (int r : ranks)
      if (l.group[r] != l.group[ranks[0]]) return false;
    return true;
  };
  if (levels_.empty()) return "inside one node";
  for (size_t i = 0; i < levels_.size(); ++i) {
    if (!together(levels_[i])) continue;
    if (i == 0) return "inside one " + levels_[0].name;
    return "across " + levels_[i - 1].name + "s, inside one " + levels_[i].name;
  }
  return "across " + levels_.back().name + "s";
}

std::string RankGrid::describe() const {
  std::ostringstream o;
  const int n = shape_.ranks();
  o << "layout: tp " << shape_.size[kTp] << " x pp " << shape_.size[kPp] << " x dp "
    << shape_.size[kDp] << " = " << n << " ranks, order " << grid_order_text(shape_.order)
    << " (innermost first) over the hierarchy";
  if (levels_.empty()) o << " (one node)";
  for (const GridLevel& l : levels_) {
    o << " | " << l.name << "s:";
    int groups = *std::max_element(l.group.begin(), l.group.end()) + 1;
    for (int g = 0; g < groups; ++g) {
      o << (g ? " |" : "");
      for (int r = 0; r < n; ++r)
        if (l.group[r] == g) o << " " << r;
    }
  }
  o << "\n  rank (tp,pp,dp):";
  for (int r = 0; r < n; ++r)
    o << " " << r << "(" << coords_[r][kTp] << "," << coords_[r][kPp] << "," << coords_[r][kDp] << ")";
  o << "\n";
  for (Dim d : {kTp, kPp, kDp}) {
    if (shape_.size[d] == 1) continue;
    o << "  " << kDimNames[d] << " groups of " << shape_.size[d] << ":";
    std::set<int> done;
    std::vector<std::vector<int>> groups;
    std::vector<std::string> where;
    for (int r = 0; r < n; ++r) {
      if (!done.insert(group_index(d, r)).second) continue;
      groups.push_back(group(d, r));
      where.push_back(placement(groups.back()));
    }
    const bool same = std::count(where.begin(), where.end(), where[0]) == static_cast<long>(where.size());
    for (size_t k = 0; k < groups.size(); ++k) {
      o << " [";
      for (size_t i = 0; i < groups[k].size(); ++i) o << (i ? "," : "") << groups[k][i];
      o << "]" << (same ? "" : " " + where[k]);
    }
    o << (same ? " -- " + where[0] : "") << "\n";
  }
  return o.str();
}

}  // namespace strata::train
