// STRATA_IB_HCA: which devices and ports the ibverbs transport uses, in the grammar of
// NCCL_IB_HCA. A comma-separated list of `name[:port]`; names match as prefixes
// ("mlx5" selects mlx5_0, mlx5_1, ...) unless the list starts with `=` (exact names); a
// leading `^` (before any `=`) excludes the listed ports instead of selecting them. An
// empty list selects everything. Examples: "mlx5_0:1,mlx5_1:1", "^mlx5_2", "^=mlx5_1",
// "=mlx5_0".
#pragma once

#include <string>
#include <vector>

namespace strata::ibverbs {

struct HcaEntry {
  std::string name;
  int port = -1;  // -1: any port
};

struct HcaFilter {
  bool exclude = false;  // `^`: everything but the entries
  bool exact = false;    // `=`: names match exactly, not as prefixes
  std::vector<HcaEntry> entries;
};

// Throws InvalidArgument naming `var` (and the offending entry) when malformed: an empty
// entry, an empty name, or a port that is not an integer in [1, 255].
HcaFilter parse_hca_list(const std::string& spec, const char* var = "STRATA_IB_HCA");

// Whether port `port` of device `dev` is selected.
bool hca_selected(const HcaFilter& f, const std::string& dev, int port);

}  // namespace strata::ibverbs
