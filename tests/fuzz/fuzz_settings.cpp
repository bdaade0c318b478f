// Settings values: every STRATA_* variable of ground/settings.cpp's table through its
// typed accessor, and the settings with a grammar of their own (STRATA_HIERARCHY,
// STRATA_LINK_MODEL, STRATA_IB_HCA, UCX_TLS as Strata reads it). The first byte picks
// the setting, the rest is its value (up to a NUL, as the environment holds it).
#include <cmath>

#include "algorithms/hierarchy.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "tests/fuzz/fuzz.hpp"
#include "transports/ibverbs/ib_hca.hpp"
#include "transports/ucx/ucx_config.hpp"

using namespace strata;

namespace {

// A hierarchy built from `spec` and `link_model` over 9 ranks on 3 hosts must give every
// rank a group in range at every level, and finite, positive link models.
void check_hierarchy(const std::vector<LevelSpec>& spec, const std::string& link_model) {
  std::vector<std::string> hosts;
  for (int r = 0; r < 9; ++r) hosts.push_back("host" + std::to_string(r % 3));
  Hierarchy h = build_hierarchy(hosts, spec, link_model);
  FUZZ_CHECK(!h.levels.empty());
  for (const Level& l : h.levels) {
    FUZZ_CHECK(l.group.size() == hosts.size() && l.ngroups >= 1);
    for (int g : l.group) FUZZ_CHECK(g >= 0 && g < l.ngroups);
    FUZZ_CHECK(std::isfinite(l.link.latency_s) && l.link.latency_s > 0);
    FUZZ_CHECK(std::isfinite(l.link.bandwidth_Bps) && l.link.bandwidth_Bps > 0);
  }
  FUZZ_CHECK(std::isfinite(h.top.latency_s) && h.top.latency_s > 0);
  FUZZ_CHECK(std::isfinite(h.top.bandwidth_Bps) && h.top.bandwidth_Bps > 0);
  for (int r = 0; r < 9; ++r) {
    int node = emulated_node(spec, r);
    FUZZ_CHECK(node >= -1 && node <= r);
  }
  (void)h.describe();
}

void table_setting(const settings::Setting& s, const std::string& value) {
  setenv(s.name, value.c_str(), 1);
  try {
    if (s.type == settings::Type::integer) {
      long long x = settings::integer(s.name);
      FUZZ_CHECK(x >= s.lo && x <= s.hi);
    } else if (s.type == settings::Type::number) {
      double x = settings::number(s.name);
      FUZZ_CHECK(x >= s.lo && x <= s.hi);
    } else {
      std::string x = settings::text(s.name);
      if (s.choices && !x.empty()) FUZZ_CHECK(("|" + std::string(s.choices) + "|").find("|" + x + "|") != std::string::npos);
    }
    (void)Config::from_env();
  } catch (const InvalidArgument&) {
  }
  unsetenv(s.name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const auto table = settings::all();
  const size_t pick = in.byte() % (table.size() + 4);
  std::string value = in.rest();
  value = value.substr(0, value.find('\0'));
  if (pick < table.size()) {
    table_setting(table[pick], value);
    return 0;
  }
  try {
    switch (pick - table.size()) {
      case 0:
        check_hierarchy(parse_hierarchy_spec(value), "");
        break;
      case 1:
        check_hierarchy({}, value);
        break;
      case 2: {
        ibverbs::HcaFilter f = ibverbs::parse_hca_list(value);
        for (const auto& e : f.entries) FUZZ_CHECK(!e.name.empty() && (e.port == -1 || (e.port >= 1 && e.port <= 255)));
        (void)ibverbs::hca_selected(f, "mlx5_0", 1);
        break;
      }
      default:
        (void)ucx::tcp_use(value.c_str());
        (void)ucx::mapped_memory_use(value.c_str());
        break;
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("STRATA_DEBUG", "NONE", 1);  // Config::from_env warns of unknown variables
  return 0;
}
