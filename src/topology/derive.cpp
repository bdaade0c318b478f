// Facts derived from the base data of a HostTopology: PCI paths, each GPU's nearest NIC,
// GPUs sharing a PCI switch, NVLink bandwidth through NVSwitches. Pure functions of the
// struct (no hwloc), so they can be checked on any topology.
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "topology/topology.hpp"

namespace strata::topo {

const char* to_string(Locality l) {
  switch (l) {
    case Locality::same_device:
      return "DEV";
    case Locality::pci_switch:
      return "PIX";
    case Locality::pci_switches:
      return "PXB";
    case Locality::host_bridge:
      return "PHB";
    case Locality::numa_node:
      return "NODE";
    case Locality::package:
      return "PKG";
    case Locality::system:
      return "SYS";
  }
  return "?";
}

const char* description(Locality l) {
  switch (l) {
    case Locality::same_device:
      return "same PCI device";
    case Locality::pci_switch:
      return "same PCI switch";
    case Locality::pci_switches:
      return "common PCI switch, several bridges";
    case Locality::host_bridge:
      return "same PCI host bridge";
    case Locality::numa_node:
      return "same NUMA node";
    case Locality::package:
      return "same package";
    case Locality::system:
      return "across packages";
  }
  return "?";
}

std::string Nic::name() const {
  std::string s;
  for (const auto& n : netdevs) s += (s.empty() ? "" : ",") + n;
  for (const auto& r : rdma_devices) s += (s.empty() ? "" : "/") + r;
  return s;
}

int HostTopology::numa_index(int os_index) const {
  for (size_t i = 0; i < numa_nodes.size(); i++)
    if (numa_nodes[i].os_index == os_index) return static_cast<int>(i);
  return -1;
}

uint64_t HostTopology::nvlink_bandwidth(int a, int b) const {
  size_t g = gpus.size();
  if (a < 0 || b < 0 || static_cast<size_t>(a) >= g || static_cast<size_t>(b) >= g) return 0;
  if (nvlink.gpu_gpu_total.size() != g * g) return 0;
  return nvlink.gpu_gpu_total[a * g + b];
}

Path device_path(const HostTopology& t, int a, int numa_a, int package_a, int b, int numa_b, int package_b) {
  Path p;
  if (a >= 0 && b >= 0) {
    if (a == b) return {Locality::same_device, 0};
    // Lowest common ancestor in the PCI tree.
    int x = a, y = b;
    while (x >= 0 && y >= 0 && x != y) {
      if (t.pci[x].depth >= t.pci[y].depth)
        x = t.pci[x].parent;
      else
        y = t.pci[y].parent;
    }
    if (x >= 0 && x == y) {
      const PciNode& lca = t.pci[x];
      int da = t.pci[a].depth - lca.depth, db = t.pci[b].depth - lca.depth;
      p.hops = da + db;
      if (lca.kind == PciNode::Kind::host_bridge)
        p.locality = Locality::host_bridge;
      else
        // A PCI switch shows as its upstream bridge with one downstream bridge per port:
        // devices on one switch are at most two levels below their common bridge.
        p.locality = (da <= 2 && db <= 2) ? Locality::pci_switch : Locality::pci_switches;
      return p;
    }
  }
  if (numa_a >= 0 && numa_a == numa_b)
    p.locality = Locality::numa_node;
  else if (package_a >= 0 && package_a == package_b)
    p.locality = Locality::package;
  else
    p.locality = Locality::system;
  return p;
}

Path pci_path(const HostTopology& t, int a, int b) {
  auto nd = [&](int i) { return i >= 0 ? t.pci[i].numa_node : -1; };
  auto pk = [&](int i) { return i >= 0 ? t.pci[i].package : -1; };
  return device_path(t, a, nd(a), pk(a), b, nd(b), pk(b));
}

namespace {

uint64_t numa_distance(const HostTopology& t, int numa_a, int numa_b) {
  size_t n = t.numa_nodes.size();
  if (t.numa_distance.size() != n * n) return 0;
  int i = t.numa_index(numa_a), j = t.numa_index(numa_b);
  if (i < 0 || j < 0) return std::numeric_limits<uint64_t>::max() / 2;
  return t.numa_distance[i * n + j];
}

// The top bridge below the host bridge on the way to `node` (-1 if none).
int top_bridge(const HostTopology& t, int node) {
  int top = -1;
  for (int i = node; i >= 0; i = t.pci[i].parent)
    if (t.pci[i].kind == PciNode::Kind::bridge) top = i;
  return top;
}

}  // namespace

void derive(HostTopology& t) {
  const size_t G = t.gpus.size();

  // Nearest NIC of each GPU: best locality class, then an RDMA device, then fewest PCI
  // hops, then the nearest NUMA node (NUMALatency), then the lowest index.
  for (auto& g : t.gpus) {
    g.nearest_nic = -1;
    g.nic_path = Path{};
    g.pci_switch = g.pci_node >= 0 ? top_bridge(t, g.pci_node) : -1;
    using Key = std::tuple<int, int, int, uint64_t, size_t>;
    Key best{};
    for (size_t i = 0; i < t.nics.size(); i++) {
      const Nic& n = t.nics[i];
      Path p = device_path(t, g.pci_node, g.numa_node, g.package, n.pci_node, n.numa_node, n.package);
      Key k{static_cast<int>(p.locality), n.rdma() ? 0 : 1, p.hops < 0 ? 1 << 20 : p.hops,
            numa_distance(t, g.numa_node, n.numa_node), i};
      if (g.nearest_nic < 0 || k < best) {
        best = k;
        g.nearest_nic = static_cast<int>(i);
        g.nic_path = p;
      }
    }
  }

  t.gpu_gpu_path.assign(G * G, Path{});
  for (size_t a = 0; a < G; a++)
    for (size_t b = 0; b < G; b++) {
      const Gpu &x = t.gpus[a], &y = t.gpus[b];
      t.gpu_gpu_path[a * G + b] =
          a == b ? Path{Locality::same_device, 0}
                 : device_path(t, x.pci_node, x.numa_node, x.package, y.pci_node, y.numa_node, y.package);
    }

  std::map<int, std::vector<int>> by_switch;
  for (size_t i = 0; i < G; i++)
    if (t.gpus[i].pci_switch >= 0) by_switch[t.gpus[i].pci_switch].push_back(static_cast<int>(i));
  t.gpu_switch_groups.clear();
  for (auto& [sw, members] : by_switch)
    if (members.size() >= 2) t.gpu_switch_groups.push_back(members);
  std::sort(t.gpu_switch_groups.begin(), t.gpu_switch_groups.end());

  NvLink& nv = t.nvlink;
  nv.gpu_gpu_total.clear();
  if (nv.present && nv.gpu_gpu.size() == G * G) {
    const size_t S = t.nvswitches.size();
    std::vector<uint64_t> to_fabric(G, 0);
    if (nv.gpu_switch.size() == G * S)
      for (size_t a = 0; a < G; a++)
        for (size_t s = 0; s < S; s++) to_fabric[a] += nv.gpu_switch[a * S + s];
    nv.gpu_gpu_total = nv.gpu_gpu;
    for (size_t a = 0; a < G; a++)
      for (size_t b = 0; b < G; b++)
        if (a != b) nv.gpu_gpu_total[a * G + b] += std::min(to_fabric[a], to_fabric[b]);
  }
}

}  // namespace strata::topo
