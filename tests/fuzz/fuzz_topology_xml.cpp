// hwloc XML topologies (topology/: STRATA_TOPO_FILE, strata-topo --topo-file): hwloc's
// XML import, then Strata's loader and the derived facts over whatever hwloc accepted.
// Every index the loader stores must point into its own vectors, and the report must
// render.
#include <sstream>

#include "tests/fuzz/fuzz.hpp"
#include "topology/topology.hpp"

using namespace strata;

namespace {
bool index_ok(int i, size_t n) { return i >= -1 && i < static_cast<int>(n); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  try {
    topo::HostTopology t = topo::load_topology_xml(xml, "fuzz input");
    for (const auto& p : t.pci) FUZZ_CHECK(index_ok(p.parent, t.pci.size()));
    for (const auto& g : t.gpus) {
      FUZZ_CHECK(index_ok(g.pci_node, t.pci.size()) && index_ok(g.nearest_nic, t.nics.size()));
      FUZZ_CHECK(index_ok(g.pci_switch, t.pci.size()));
    }
    for (const auto& n : t.nics) FUZZ_CHECK(index_ok(n.pci_node, t.pci.size()));
    for (const auto& s : t.nvswitches) FUZZ_CHECK(index_ok(s.pci_node, t.pci.size()));
    FUZZ_CHECK(t.gpu_gpu_path.size() == t.gpus.size() * t.gpus.size());
    for (const auto& group : t.gpu_switch_groups)
      for (int g : group) FUZZ_CHECK(g >= 0 && g < static_cast<int>(t.gpus.size()));
    for (size_t a = 0; a < t.gpus.size(); ++a)
      for (size_t b = 0; b < t.gpus.size(); ++b) {
        (void)t.gpu_path(static_cast<int>(a), static_cast<int>(b));
        (void)t.nvlink_bandwidth(static_cast<int>(a), static_cast<int>(b));
      }
    std::ostringstream out;
    topo::print_host_topology(out, t);
    topo::print_pci_tree(out, t);
  } catch (const topo::TopologyError&) {
  }
  return 0;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("STRATA_DEBUG", "NONE", 1);
  return 0;
}
