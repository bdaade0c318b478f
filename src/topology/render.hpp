// A small aligned-columns table, used by strata-topo's sections (and for later ones, such
// as the ranks/hierarchy section under strata-run).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace strata::topo {

class Table {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns separated by two spaces; columns from `right_align_from` on are right-aligned.
  void print(std::ostream& out, const std::string& indent,
             size_t right_align_from = static_cast<size_t>(-1)) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace strata::topo
