// Text rendering of a HostTopology: the host part of strata-topo's report.
#include "topology/render.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "topology/topology.hpp"

namespace strata::topo {

namespace {

std::string str(int v) { return v < 0 ? "-" : std::to_string(v); }

std::string bytes(uint64_t b) {
  if (b == 0) return "-";
  char buf[32];
  double gib = static_cast<double>(b) / (1ull << 30);
  if (gib >= 10)
    snprintf(buf, sizeof buf, "%.0f GiB", gib);
  else if (gib >= 1)
    snprintf(buf, sizeof buf, "%.1f GiB", gib);
  else
    snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(b) / (1 << 20));
  return buf;
}

// MB/s (hwloc's unit) as GB/s.
std::string gbps(uint64_t mbps) {
  if (mbps == 0) return "-";
  char buf[32];
  if (mbps % 1000 == 0)
    snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mbps / 1000));
  else
    snprintf(buf, sizeof buf, "%.1f", static_cast<double>(mbps) / 1000);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s.empty() ? "-" : s;
}

std::string join(const std::vector<int>& v, const char* sep = ",") {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return join(s, sep);
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void matrix(std::ostream& out, const std::vector<std::string>& labels, const std::vector<std::string>& cells,
            const std::string& indent) {
  size_t n = labels.size();
  Table tab;
  std::vector<std::string> head{""};
  head.insert(head.end(), labels.begin(), labels.end());
  tab.row(head);
  for (size_t i = 0; i < n; i++) {
    std::vector<std::string> r{labels[i]};
    for (size_t j = 0; j < n; j++) r.push_back(cells[i * n + j]);
    tab.row(r);
  }
  tab.print(out, indent, /*right_align_from=*/1);
}

}  // namespace

void Table::print(std::ostream& out, const std::string& indent, size_t right_align_from) const {
  std::vector<size_t> w;
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size(); i++) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  for (const auto& r : rows_) {
    std::string line = indent;
    for (size_t i = 0; i < r.size(); i++) {
      std::string cell = r[i];
      bool last = i + 1 == r.size();
      if (i >= right_align_from)
        line += std::string(w[i] - cell.size(), ' ') + cell;
      else
        line += last ? cell : cell + std::string(w[i] - cell.size(), ' ');
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

void print_host_topology(std::ostream& out, const HostTopology& t) {
  out << "Host topology of " << t.source << " (hwloc " << HWLOC_VERSION << ")\n";
  out << "  " << (t.machine.empty() ? "machine" : t.machine) << ": "
      << plural(t.packages.size(), "package", "packages") << ", "
      << plural(t.numa_nodes.size(), "NUMA node", "NUMA nodes") << ", "
      << plural(static_cast<size_t>(t.num_cores), "core", "cores") << ", "
      << plural(static_cast<size_t>(t.num_pus), "PU", "PUs") << ", " << plural(t.gpus.size(), "GPU", "GPUs")
      << ", " << plural(t.nics.size(), "NIC", "NICs");
  if (!t.nvswitches.empty()) out << ", " << plural(t.nvswitches.size(), "NVSwitch", "NVSwitches");
  out << "\n";

  out << "\nPackages\n";
  Table pk;
  pk.row({"package", "cpus", "cores", "PUs", "NUMA", "model"});
  for (const auto& p : t.packages)
    pk.row({str(p.os_index), p.cpus.empty() ? "-" : p.cpus, std::to_string(p.num_cores),
            std::to_string(p.num_pus), join(p.numa_nodes), p.model.empty() ? "-" : p.model});
  pk.print(out, "  ");

  out << "\nNUMA nodes\n";
  Table nt;
  nt.row({"node", "package", "cpus", "PUs", "memory"});
  for (const auto& n : t.numa_nodes)
    nt.row({str(n.os_index), str(n.package), n.cpus.empty() ? "-" : n.cpus, std::to_string(n.num_pus),
            bytes(n.memory_bytes)});
  nt.print(out, "  ");
  size_t N = t.numa_nodes.size();
  if (N > 1 && t.numa_distance.size() == N * N) {
    if (N <= 16) {
      out << "  NUMA distances (relative latency):\n";
      std::vector<std::string> labels, cells;
      for (const auto& n : t.numa_nodes) labels.push_back(std::to_string(n.os_index));
      for (uint64_t d : t.numa_distance) cells.push_back(std::to_string(d));
      matrix(out, labels, cells, "    ");
    } else {
      uint64_t lo = ~0ull, hi = 0;
      for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
          if (i != j)
            lo = std::min(lo, t.numa_distance[i * N + j]), hi = std::max(hi, t.numa_distance[i * N + j]);
      out << "  NUMA distances: " << t.numa_distance[0] << " local, " << lo << " to " << hi
          << " between nodes (" << N << "x" << N << " matrix: lstopo --distances)\n";
    }
  }

  out << "\nGPUs";
  if (t.gpus.empty()) {
    out << ": none\n";
  } else {
    out << "\n";
    Table gt;
    gt.row({"gpu", "PCI", "NUMA", "nearest NIC", "path", "devices", "model"});
    for (size_t i = 0; i < t.gpus.size(); i++) {
      const Gpu& g = t.gpus[i];
      std::string nic = g.nearest_nic >= 0 ? t.nics[g.nearest_nic].name() : "-";
      std::string path = g.nearest_nic >= 0 ? to_string(g.nic_path.locality) : "-";
      gt.row({std::to_string(i), g.pci_busid.empty() ? "-" : g.pci_busid, str(g.numa_node), nic, path,
              join(g.os_devices), g.model.empty() ? "-" : g.model});
    }
    gt.print(out, "  ");
    if (!t.gpu_switch_groups.empty()) {
      out << "  GPUs sharing a PCI switch:";
      for (const auto& grp : t.gpu_switch_groups) out << " {" << join(grp) << "}";
      out << "\n";
    }
  }

  out << "\nNICs";
  if (t.nics.empty()) {
    out << ": none\n";
  } else {
    out << "\n";
    Table ntab;
    ntab.row({"nic", "PCI", "NUMA", "netdev", "RDMA", "model"});
    for (size_t i = 0; i < t.nics.size(); i++) {
      const Nic& n = t.nics[i];
      ntab.row({std::to_string(i), n.pci_busid.empty() ? "-" : n.pci_busid, str(n.numa_node), join(n.netdevs),
                join(n.rdma_devices), n.model.empty() ? "-" : n.model});
    }
    ntab.print(out, "  ");
  }

  if (!t.nvswitches.empty()) {
    out << "\nNVSwitches\n";
    std::vector<int> nodes;
    for (const auto& s : t.nvswitches)
      if (std::find(nodes.begin(), nodes.end(), s.numa_node) == nodes.end()) nodes.push_back(s.numa_node);
    Table st;
    for (int node : nodes) {
      std::vector<std::string> busids;
      for (const auto& s : t.nvswitches)
        if (s.numa_node == node) busids.push_back(s.pci_busid);
      st.row({"NUMA " + str(node), join(busids, " ")});
    }
    st.print(out, "  ");
  }

  size_t G = t.gpus.size();
  if (t.nvlink.present && G > 0 && t.nvlink.gpu_gpu_total.size() == G * G) {
    out << "\nNVLink bandwidth GPU to GPU, GB/s ("
        << (t.nvswitches.empty() ? "direct links" : "direct links plus the NVSwitch fabric") << ")\n";
    std::vector<std::string> labels, cells;
    for (size_t i = 0; i < G; i++) labels.push_back(std::to_string(i));
    for (size_t a = 0; a < G; a++)
      for (size_t b = 0; b < G; b++) cells.push_back(a == b ? "." : gbps(t.nvlink.gpu_gpu_total[a * G + b]));
    matrix(out, labels, cells, "  ");
    size_t P = t.packages.size();
    if (t.nvlink.gpu_cpu.size() == G * P) {
      bool any =
          std::any_of(t.nvlink.gpu_cpu.begin(), t.nvlink.gpu_cpu.end(), [](uint64_t x) { return x > 0; });
      if (any) {
        std::vector<std::string> links;
        for (size_t a = 0; a < G; a++)
          for (size_t p = 0; p < P; p++)
            if (t.nvlink.gpu_cpu[a * P + p])
              links.push_back("gpu " + std::to_string(a) + " - package " +
                              std::to_string(t.packages[p].os_index) + " " +
                              gbps(t.nvlink.gpu_cpu[a * P + p]));
        out << "  NVLink GPU to CPU, GB/s: " << join(links, ", ") << "\n";
      }
    }
  }

  if (!t.notes.empty()) {
    out << "\nNotes\n";
    for (const auto& n : t.notes) out << "  - " << n << "\n";
  }
}

void print_pci_tree(std::ostream& out, const HostTopology& t) {
  out << "\nPCI tree (node: bus id, class, name [OS devices])\n";
  for (size_t i = 0; i < t.pci.size(); i++) {
    const PciNode& n = t.pci[i];
    std::string line = "  " + std::string(2 * n.depth, ' ');
    if (n.kind == PciNode::Kind::host_bridge) {
      line += "HostBridge " + n.busid + "  NUMA " + str(n.numa_node);
    } else {
      line += (n.kind == PciNode::Kind::bridge ? "Bridge " : "PCI ") + n.busid;
      if (!n.subtype.empty()) line += " (" + n.subtype + ")";
      if (n.kind == PciNode::Kind::device) line += "  " + n.name;
      if (!n.os_devices.empty()) line += "  [" + join(n.os_devices) + "]";
    }
    out << line << "\n";
  }
}

std::string render(const HostTopology& t) {
  std::ostringstream s;
  print_host_topology(s, t);
  return s.str();
}

}  // namespace strata::topo
