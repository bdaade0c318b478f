// Lists of ranks as messages print them: "rank 3", "ranks 0, 2-4", "no ranks".
#pragma once

#include <string>
#include <vector>

namespace strata {

std::string ranks_text(const std::vector<int>& ranks);  // ranks ascending

}  // namespace strata
