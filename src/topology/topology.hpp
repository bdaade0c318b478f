// Topology of one host, discovered with hwloc: packages, NUMA nodes, the PCI tree, GPUs,
// NICs (network and RDMA devices), NVSwitches and NVLink bandwidths, plus derived facts
// (each GPU's NUMA node and nearest NIC, which GPUs share a PCI switch).
//
//   strata::topo::HostTopology t = strata::topo::load_host_topology();  // STRATA_TOPO_FILE or live
//   for (const auto& g : t.gpus) ... g.numa_node, g.nearest_nic ...
//   std::cout << strata::topo::render(t);
//
// HostTopology is plain data (no hwloc types), copyable and safe to keep after
// loading. Indexes stored in it (Gpu::nearest_nic, Nic::pci_node, ...) point into its own
// vectors; -1 means "none" or "unknown". NUMA nodes and packages are named by their
// hwloc *OS index* (P#, what numactl and /sys use) in the `numa_node`/`package` fields.
// See docs/topology.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "strata/error.hpp"

namespace strata::topo {

// Where a file could not be loaded (missing, unreadable, not an hwloc XML topology) or
// hwloc failed on this machine. what() names the file; kind() is invalid_argument for a
// bad file and system for a failure of live discovery.
class TopologyError : public Error {
 public:
  TopologyError(ErrorKind kind, const std::string& file, const std::string& what)
      : Error(kind, what), file_(file) {}
  const std::string& file() const { return file_; }  // empty for the live machine

 private:
  std::string file_;
};

// How far apart two devices are, best first (NCCL's names in brackets):
enum class Locality {
  same_device,   // the same PCI function (e.g. cuda0 and nvml0)
  pci_switch,    // behind one PCI bridge/switch, without crossing the host bridge [PIX]
  pci_switches,  // behind a common PCI switch, through several bridges [PXB]
  host_bridge,   // same PCI host bridge (root complex), crossing it [PHB]
  numa_node,     // different host bridges of the same NUMA node [NODE]
  package,       // different NUMA nodes of the same package (e.g. sub-NUMA clustering)
  system,        // across the inter-socket link, or unknown [SYS]
};
const char* to_string(Locality l);    // "PIX", "PXB", "PHB", ...
const char* description(Locality l);  // "same PCI switch", ...

struct Path {
  Locality locality = Locality::system;
  int hops = -1;  // edges between the two devices in the PCI tree; -1 when not in one tree
};

struct Package {
  int os_index = -1;
  std::string cpus;  // PU OS indexes as a list, "0-7,16-23"
  int num_cores = 0;
  int num_pus = 0;
  std::vector<int> numa_nodes;  // OS indexes
  std::string model;            // CPUModel, when known
};

struct NumaNode {
  int os_index = -1;
  int package = -1;  // OS index of its package, -1 when it spans several or none
  std::string cpus;  // "" for a memory-only node
  int num_pus = 0;
  uint64_t memory_bytes = 0;
};

// One node of the PCI tree. Host bridges are roots (parent -1); bridges and devices hang
// below them in hwloc's order.
struct PciNode {
  enum class Kind { host_bridge, bridge, device };
  Kind kind = Kind::device;
  std::string busid;      // "0000:84:00.0"; for a host bridge its bus range "0000:[80-84]"
  uint16_t class_id = 0;  // e.g. 0x0302 (3D controller), 0x0200 (Ethernet)
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  std::string subtype;                  // hwloc subtype, e.g. "NVSwitch"
  std::string name;                     // PCIDevice description when known, else the class ("Ethernet")
  int parent = -1;                      // index in HostTopology::pci
  int depth = 0;                        // 0 for a host bridge
  int numa_node = -1;                   // of the object its host bridge hangs from; -1 if several
  int package = -1;                     // OS index, -1 if not one package
  std::vector<std::string> os_devices;  // names of hwloc OS devices on it (eth0, cuda0, ...)
};

struct Gpu {
  std::string pci_busid;                // "" when hwloc did not attach it to PCI
  int pci_node = -1;                    // index in HostTopology::pci
  std::vector<std::string> os_devices;  // every hwloc OS device of this GPU: cuda0, nvml0, opencl0d0, card0
  std::string vendor;                   // "NVIDIA", "AMD", "Intel", or the GPUVendor info
  std::string model;                    // GPUModel info, else the PCI description
  std::string uuid;                     // NVIDIAUUID / AMDUUID when known
  int numa_node = -1;                   // OS index; -1 when unknown
  int package = -1;                     // OS index; -1 when unknown
  int nearest_nic = -1;                 // index in HostTopology::nics, -1 if there is no NIC
  Path nic_path;                        // how far that NIC is
  int pci_switch = -1;                  // index in pci of the top bridge below the host bridge; GPUs
                                        // with the same value share a PCI switch (-1: none)
};

struct Nic {
  std::string pci_busid;  // "" when not on PCI (virtual devices)
  int pci_node = -1;
  std::vector<std::string> netdevs;       // network interfaces: eth0, ib0, enp65s0f0
  std::vector<std::string> rdma_devices;  // OpenFabrics (verbs) devices: mlx5_0
  std::string model;                      // PCI description
  std::string address;                    // MAC / GID of the first netdev, when known
  int numa_node = -1;
  int package = -1;
  bool rdma() const { return !rdma_devices.empty(); }
  std::string name() const;  // "ib0/mlx5_0", "eth0", "mlx5_1"
};

struct NvSwitch {
  std::string pci_busid;
  int pci_node = -1;
  int numa_node = -1;
};

// hwloc's "NVLinkBandwidth" matrix, in MB/s, rearranged by our GPU/NVSwitch/package order.
struct NvLink {
  bool present = false;              // the topology has an NVLinkBandwidth matrix
  std::vector<uint64_t> gpu_gpu;     // G*G direct links (diagonal 0)
  std::vector<uint64_t> gpu_switch;  // G*S, GPU to each NVSwitch
  std::vector<uint64_t> gpu_cpu;     // G*P, GPU to a package (POWER's CPU NVLink)
  // G*G: direct + through the NVSwitch fabric. All NVSwitches are taken as one fabric (the
  // matrix has no switch-to-switch links): through it a->b gets min(sum of a's switch
  // links, sum of b's switch links), as lstopo's transitive-closure transform shows.
  std::vector<uint64_t> gpu_gpu_total;
};

struct HostTopology {
  std::string source;   // "this machine" or the XML file's path
  std::string machine;  // DMIProductName / PlatformName, when known
  int num_cores = 0;
  int num_pus = 0;
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<uint64_t> numa_distance;  // N*N hwloc "NUMALatency" (10 = local); empty if unknown
  std::vector<PciNode> pci;
  std::vector<Gpu> gpus;  // ordered by PCI bus id (nvml order; CUDA with PCI_BUS_ID order)
  std::vector<Nic> nics;  // ordered by PCI bus id, non-PCI ones last
  std::vector<NvSwitch> nvswitches;
  NvLink nvlink;
  std::vector<Path> gpu_gpu_path;                   // G*G PCI paths between GPUs
  std::vector<std::vector<int>> gpu_switch_groups;  // sets (>= 2) of GPUs sharing a PCI switch
  std::vector<std::string> notes;                   // what was noticed while loading (decoding choices etc.)

  // NVLink bandwidth a->b in MB/s, direct plus through NVSwitches; 0 when none is known.
  uint64_t nvlink_bandwidth(int gpu_a, int gpu_b) const;
  const Path& gpu_path(int a, int b) const { return gpu_gpu_path[a * gpus.size() + b]; }
  // Index in numa_nodes of the node with this OS index, -1 if none.
  int numa_index(int os_index) const;
};

// Loads STRATA_TOPO_FILE when it is set (and not empty), else this machine.
HostTopology load_host_topology();
// This machine, as a job sees it (allowed CPUs only, all I/O devices hwloc finds).
HostTopology load_live_topology();
// An hwloc XML file (as written by `lstopo FILE.xml` or hwloc's export).
HostTopology load_topology_file(const std::string& path);
// The same from XML text; `name` stands for the file in errors and in `source`.
HostTopology load_topology_xml(std::string_view xml, const std::string& name);

// The path between two nodes of t.pci.
Path pci_path(const HostTopology& t, int pci_a, int pci_b);
// The path between two devices (what derive() uses): through the PCI tree when both are in
// one, else by NUMA node and package. pci_* may be -1 (a device not on PCI).
Path device_path(const HostTopology& t, int pci_a, int numa_a, int package_a, int pci_b, int numa_b,
                 int package_b);

// Fills the derived facts of t (paths, nearest NICs, switch groups, NVLink totals) from
// its base facts. The loaders call it; tests and tools may call it on edited topologies.
void derive(HostTopology& t);

// The host part of `strata-topo`'s report: machine, packages, NUMA nodes, GPUs, NICs,
// NVSwitches, NVLink matrix. Aligned text, one section after another.
void print_host_topology(std::ostream& out, const HostTopology& t);
std::string render(const HostTopology& t);
// The PCI tree (host bridges, bridges, devices and their OS devices), indented.
void print_pci_tree(std::ostream& out, const HostTopology& t);

}  // namespace strata::topo
