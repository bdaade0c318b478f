// Loading a host topology with hwloc and turning it into HostTopology's plain data.
// The derived facts (paths, nearest NIC, ...) are computed in derive.cpp.
#include "topology/topology.hpp"

#include <hwloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <type_traits>

#include "ground/log.hpp"
#include "ground/settings.hpp"
#include "topology/pci_names.hpp"

namespace strata::topo {
namespace {

// ---- hwloc handles ----

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string bitmap_list(hwloc_const_bitmap_t b) {
  if (!b || hwloc_bitmap_iszero(b)) return "";
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s) return "";
  std::string out(s);
  free(s);
  return out;
}

std::string info(hwloc_obj_t o, const char* name) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, name) : nullptr;
  return v ? v : "";
}

std::string busid_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", p.domain, p.bus, p.dev, p.func);
  return buf;
}

// ---- OS device classification ----
//
// hwloc 2.x numbers OS device types 0..5 (block, gpu, network, openfabrics, dma, coproc).
// hwloc 3.x writes a bit set instead (storage 1, memory 2, gpu 4, coproc 8, network 16,
// openfabrics 32, dma 64), and hwloc 2.9 loads such XML files without translating it: a
// disk then reads as a "GPU" (lstopo 2.9 shows `GPU "sda"`) and a NIC as type 16. We
// detect the 3.x encoding (a value above 5, or a type-1 "GPU" named like a disk) and
// decode it.

enum Kind : unsigned {
  k_storage = 1,
  k_memory = 2,
  k_gpu = 4,
  k_coproc = 8,
  k_network = 16,
  k_openfabrics = 32,
  k_dma = 64,
};

bool looks_like_block_device(const std::string& n) {
  static const std::regex re(
      "^(sd[a-z]+|hd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme[0-9]+(n[0-9]+)?|"
      "mmcblk[0-9]+|pmem[0-9.]+|dax[0-9.]+|md[0-9]+|dm-[0-9]+)$");
  return std::regex_match(n, re);
}

// DRM and X display devices: every display adapter has them (the BMC's VGA too), so on
// their own they do not make a compute GPU.
bool is_display_osdev(const std::string& name, const std::string& subtype) {
  static const std::regex re("^(card[0-9]+|renderD[0-9]+|controlD[0-9]+|:[0-9.]+)$");
  return std::regex_match(name, re) || subtype == "Display" || subtype == "GL";
}

unsigned decode_v2(unsigned t) {
  switch (t) {
    case 0:
      return k_storage;
    case 1:
      return k_gpu;
    case 2:
      return k_network;
    case 3:
      return k_network | k_openfabrics;
    case 4:
      return k_dma;
    case 5:
      return k_coproc;
    default:
      return 0;
  }
}

struct OsDev {
  hwloc_obj_t obj;
  std::string name, subtype;
  unsigned raw = 0;
  unsigned kinds = 0;
  hwloc_obj_t pci = nullptr;  // the PCI device it belongs to, if any
};

// ---- where an I/O object sits ----

// The OS index of a package or NUMA node; the logical index when the OS gives none (some
// VMs do not number their sockets).
int os_index(hwloc_obj_t o) {
  return o->os_index == HWLOC_UNKNOWN_INDEX ? static_cast<int>(o->logical_index)
                                            : static_cast<int>(o->os_index);
}

struct Place {
  int numa = -1;     // OS index
  int package = -1;  // OS index
};

Place place_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  Place p;
  hwloc_obj_t anc = obj->type == HWLOC_OBJ_NUMANODE ? obj : hwloc_get_non_io_ancestor_obj(topo, obj);
  if (!anc) return p;
  if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) p.numa = hwloc_bitmap_first(anc->nodeset);
  for (hwloc_obj_t a = anc; a; a = a->parent)
    if (a->type == HWLOC_OBJ_PACKAGE) {
      p.package = os_index(a);
      return p;
    }
  // Above the packages (or no package at all): one package if its CPUs are all in it.
  if (anc->cpuset && !hwloc_bitmap_iszero(anc->cpuset)) {
    hwloc_obj_t pkg = nullptr;
    while ((pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg)))
      if (hwloc_bitmap_isincluded(anc->cpuset, pkg->cpuset)) {
        p.package = os_index(pkg);
        break;
      }
  }
  return p;
}

// ---- loading ----

class Loader {
 public:
  Loader(hwloc_topology_t topo, HostTopology& t) : topo_(topo), t_(t) {}

  void run() {
    hwloc_obj_t root = hwloc_get_root_obj(topo_);
    t_.machine = info(root, "DMIProductName");
    if (t_.machine.empty()) t_.machine = info(root, "PlatformModel");
    if (t_.machine.empty()) t_.machine = info(root, "PlatformName");
    t_.num_cores = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE);
    t_.num_pus = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PU);
    packages();
    numa_nodes();
    pci_tree();
    os_devices();
    nvlink();
  }

 private:
  void packages() {
    hwloc_obj_t pkg = nullptr;
    while ((pkg = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, pkg))) {
      Package p;
      p.os_index = os_index(pkg);
      p.cpus = bitmap_list(pkg->cpuset);
      p.num_cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo_, pkg->cpuset, HWLOC_OBJ_CORE);
      p.num_pus = hwloc_get_nbobjs_inside_cpuset_by_type(topo_, pkg->cpuset, HWLOC_OBJ_PU);
      p.model = info(pkg, "CPUModel");
      t_.packages.push_back(std::move(p));
    }
  }

  void numa_nodes() {
    hwloc_obj_t n = nullptr;
    while ((n = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, n))) {
      NumaNode node;
      node.os_index = os_index(n);
      node.cpus = bitmap_list(n->cpuset);
      node.num_pus = n->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(topo_, n->cpuset, HWLOC_OBJ_PU) : 0;
      node.memory_bytes = n->attr ? n->attr->numanode.local_memory : 0;
      node.package = place_of(topo_, n).package;
      t_.numa_nodes.push_back(std::move(node));
    }
    std::sort(t_.numa_nodes.begin(), t_.numa_nodes.end(),
              [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });
    for (auto& p : t_.packages)
      for (const auto& n : t_.numa_nodes)
        if (n.package == p.os_index) p.numa_nodes.push_back(n.os_index);

    unsigned nr = 1;
    hwloc_distances_s* d = nullptr;
    if (hwloc_distances_get_by_name(topo_, "NUMALatency", &nr, &d, 0) == 0 && nr >= 1) {
      size_t n = t_.numa_nodes.size();
      std::vector<uint64_t> m(n * n, 0);
      bool complete = true;
      std::vector<int> idx(d->nbobjs);
      for (unsigned i = 0; i < d->nbobjs; i++) idx[i] = d->objs[i] ? t_.numa_index(os_index(d->objs[i])) : -1;
      for (unsigned i = 0; i < d->nbobjs; i++)
        for (unsigned j = 0; j < d->nbobjs; j++)
          if (idx[i] >= 0 && idx[j] >= 0) m[idx[i] * n + idx[j]] = d->values[i * d->nbobjs + j];
      for (size_t i = 0; i < n; i++)
        if (m[i * n + i] == 0) complete = false;
      if (complete) t_.numa_distance = std::move(m);
      hwloc_distances_release(topo_, d);
    }
  }

  // Depth-first over every host bridge, in hwloc's order.
  void pci_tree() {
    std::vector<hwloc_obj_t> host_bridges;
    hwloc_obj_t b = nullptr;
    while ((b = hwloc_get_next_bridge(topo_, b)))
      if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) host_bridges.push_back(b);
    for (hwloc_obj_t hb : host_bridges) add_pci(hb, -1, 0);
    // PCI devices that hwloc did not put under a host bridge (unusual): roots of their own.
    hwloc_obj_t d = nullptr;
    while ((d = hwloc_get_next_pcidev(topo_, d)))
      if (!pci_index_.count(d)) add_pci(d, -1, 0);
  }

  void add_pci(hwloc_obj_t o, int parent, int depth) {
    PciNode n;
    n.parent = parent;
    n.depth = depth;
    if (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      n.kind = PciNode::Kind::host_bridge;
      if (o->attr->bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        char buf[40];
        const auto& ds = o->attr->bridge.downstream.pci;
        snprintf(buf, sizeof buf, "%04x:[%02x-%02x]", ds.domain, ds.secondary_bus, ds.subordinate_bus);
        n.busid = buf;
      }
      n.name = "host bridge";
    } else {
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p =
          o->type == HWLOC_OBJ_BRIDGE ? o->attr->bridge.upstream.pci : o->attr->pcidev;
      n.kind = o->type == HWLOC_OBJ_BRIDGE ? PciNode::Kind::bridge : PciNode::Kind::device;
      n.busid = busid_of(p);
      n.class_id = p.class_id;
      n.vendor_id = p.vendor_id;
      n.device_id = p.device_id;
      n.name = info(o, "PCIDevice");
      if (n.name.empty()) n.name = pci_vendor_name(p.vendor_id) + " " + pci_class_name(p.class_id);
    }
    if (o->subtype) n.subtype = o->subtype;
    Place pl = place_of(topo_, o);
    n.numa_node = pl.numa;
    n.package = pl.package;
    int me = static_cast<int>(t_.pci.size());
    t_.pci.push_back(std::move(n));
    pci_index_[o] = me;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_BRIDGE || c->type == HWLOC_OBJ_PCI_DEVICE) add_pci(c, me, depth + 1);
  }

  void os_devices() {
    std::vector<OsDev> devs;
    hwloc_obj_t o = nullptr;
    bool v3 = false;
    while ((o = hwloc_get_next_osdev(topo_, o))) {
      OsDev d;
      d.obj = o;
      d.name = o->name ? o->name : "";
      d.subtype = o->subtype ? o->subtype : "";
      // Read as an integer: values from hwloc 3 files are not valid enumerators.
      std::underlying_type_t<hwloc_obj_osdev_type_t> raw;
      std::memcpy(&raw, &o->attr->osdev.type, sizeof raw);
      d.raw = static_cast<unsigned>(raw);
      if (d.raw > 5 || (d.raw == 1 && looks_like_block_device(d.name))) v3 = true;
      for (hwloc_obj_t p = o->parent; p; p = p->parent) {
        if (p->type == HWLOC_OBJ_PCI_DEVICE) d.pci = p;
        if (p->type != HWLOC_OBJ_OS_DEVICE) break;
      }
      devs.push_back(std::move(d));
    }
    if (v3)
      t_.notes.push_back("OS device types are hwloc 3.x flags (file written by hwloc 3); decoded as such");
    for (auto& d : devs) {
      d.kinds = v3 ? d.raw : decode_v2(d.raw);
      if (d.pci) {
        auto it = pci_index_.find(d.pci);
        if (it != pci_index_.end()) t_.pci[it->second].os_devices.push_back(d.name);
      }
    }

    // GPUs: one per PCI device (or per OS device when not on PCI) with a compute OS device.
    std::map<std::string, Gpu> gpus;  // by key: busid, or "~name" for non-PCI
    for (const auto& d : devs) {
      if (!(d.kinds & (k_gpu | k_coproc))) continue;
      if (is_display_osdev(d.name, d.subtype)) continue;
      std::string key = d.pci ? busid_of(d.pci->attr->pcidev) : "~" + d.name;
      Gpu& g = gpus[key];
      if (g.os_devices.empty()) {
        hwloc_obj_t anchor = d.pci ? d.pci : d.obj;
        Place pl = place_of(topo_, anchor);
        g.numa_node = pl.numa;
        g.package = pl.package;
        if (d.pci) {
          g.pci_busid = key;
          g.pci_node = pci_index_.at(d.pci);
        }
      }
      g.os_devices.push_back(d.name);
      if (g.model.empty()) g.model = info(d.obj, "GPUModel");
      if (g.vendor.empty()) g.vendor = short_vendor(info(d.obj, "GPUVendor"));
      if (g.uuid.empty()) g.uuid = info(d.obj, "NVIDIAUUID");
      if (g.uuid.empty()) g.uuid = info(d.obj, "AMDUUID");
      gpu_of_osdev_[d.obj] = key;
    }
    // Display devices (card0, renderD128) of a compute GPU belong to it too.
    for (const auto& d : devs)
      if ((d.kinds & (k_gpu | k_coproc)) && is_display_osdev(d.name, d.subtype) && d.pci) {
        auto it = gpus.find(busid_of(d.pci->attr->pcidev));
        if (it != gpus.end()) it->second.os_devices.push_back(d.name);
      }
    for (auto& [key, g] : gpus) {
      if (g.pci_node >= 0) {
        const PciNode& n = t_.pci[g.pci_node];
        if (g.vendor.empty()) g.vendor = pci_vendor_name(n.vendor_id);
        if (g.model.empty()) g.model = n.name;
      }
      t_.gpus.push_back(std::move(g));
    }
    // PCI order ("~" sorts after hex digits) is already the map's order.
    std::map<std::string, int> gpu_index;
    for (size_t i = 0; i < t_.gpus.size(); i++) {
      const Gpu& g = t_.gpus[i];
      gpu_index[g.pci_busid.empty() ? "~" + g.os_devices.front() : g.pci_busid] = static_cast<int>(i);
    }
    for (auto& [obj, key] : gpu_of_osdev_) gpu_by_obj_[obj] = gpu_index.at(key);

    // GPU-class PCI devices that no OS device claims (no driver, or no hwloc plugin for it).
    std::set<int> claimed;
    for (const auto& g : t_.gpus) claimed.insert(g.pci_node);
    for (size_t i = 0; i < t_.pci.size(); i++) {
      const PciNode& n = t_.pci[i];
      bool gpu_class = (n.class_id >> 8) == 0x03 || n.class_id == 0x1200;
      bool gpu_vendor = n.vendor_id == 0x10de || n.vendor_id == 0x1002 || n.vendor_id == 0x8086;
      if (n.kind == PciNode::Kind::device && gpu_class && gpu_vendor && !claimed.count(static_cast<int>(i)) &&
          n.subtype != "NVSwitch")
        t_.notes.push_back("PCI " + n.busid + " (" + n.name +
                           ") looks like a GPU but has no GPU OS device "
                           "(no driver, or no hwloc CUDA/NVML/RSMI plugin): not counted");
    }

    // NICs: network interfaces and RDMA devices, one per PCI function.
    std::map<std::string, Nic> nics;
    std::map<std::string, hwloc_obj_t> first_netdev;
    for (const auto& d : devs) {
      if (!(d.kinds & (k_network | k_openfabrics))) continue;
      std::string key = d.pci ? busid_of(d.pci->attr->pcidev) : "~" + d.name;
      Nic& n = nics[key];
      if (n.netdevs.empty() && n.rdma_devices.empty()) {
        Place pl = place_of(topo_, d.pci ? d.pci : d.obj);
        n.numa_node = pl.numa;
        n.package = pl.package;
        if (d.pci) {
          n.pci_busid = key;
          n.pci_node = pci_index_.at(d.pci);
          n.model = t_.pci[n.pci_node].name;
        }
      }
      if (d.kinds & k_openfabrics)
        n.rdma_devices.push_back(d.name);
      else
        n.netdevs.push_back(d.name);
      if (n.address.empty() && !(d.kinds & k_openfabrics)) n.address = info(d.obj, "Address");
    }
    for (auto& [key, n] : nics) t_.nics.push_back(std::move(n));

    for (size_t i = 0; i < t_.pci.size(); i++)
      if (t_.pci[i].subtype == "NVSwitch") {
        NvSwitch s;
        s.pci_busid = t_.pci[i].busid;
        s.pci_node = static_cast<int>(i);
        s.numa_node = t_.pci[i].numa_node;
        t_.nvswitches.push_back(s);
      }
  }

  void nvlink() {
    unsigned nr = 0;
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, nullptr, 0) != 0 || nr == 0) return;
    std::vector<hwloc_distances_s*> ds(nr);
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, ds.data(), 0) != 0) return;
    size_t G = t_.gpus.size(), S = t_.nvswitches.size(), P = t_.packages.size();
    NvLink& nv = t_.nvlink;
    nv.present = true;
    nv.gpu_gpu.assign(G * G, 0);
    nv.gpu_switch.assign(G * S, 0);
    nv.gpu_cpu.assign(G * P, 0);
    std::map<std::string, int> switch_by_busid;
    for (size_t s = 0; s < S; s++) switch_by_busid[t_.nvswitches[s].pci_busid] = static_cast<int>(s);
    for (unsigned k = 0; k < nr && k < ds.size(); k++) {
      hwloc_distances_s* d = ds[k];
      if (!d) continue;
      // What each row/column is: a GPU, an NVSwitch or a package (CPU).
      enum { none, gpu, nvswitch, package };
      std::vector<std::pair<int, int>> what(d->nbobjs, {none, -1});
      for (unsigned i = 0; i < d->nbobjs; i++) {
        hwloc_obj_t o = d->objs[i];
        if (!o) continue;
        if (o->type == HWLOC_OBJ_OS_DEVICE) {
          auto it = gpu_by_obj_.find(o);
          if (it != gpu_by_obj_.end()) what[i] = {gpu, it->second};
        } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
          auto it = switch_by_busid.find(busid_of(o->attr->pcidev));
          if (it != switch_by_busid.end()) what[i] = {nvswitch, it->second};
        } else if (o->type == HWLOC_OBJ_PACKAGE) {
          for (size_t p = 0; p < P; p++)
            if (t_.packages[p].os_index == os_index(o)) what[i] = {package, static_cast<int>(p)};
        }
      }
      for (unsigned i = 0; i < d->nbobjs; i++) {
        if (what[i].first != gpu) continue;
        int a = what[i].second;
        for (unsigned j = 0; j < d->nbobjs; j++) {
          uint64_t v = d->values[i * d->nbobjs + j];
          int b = what[j].second;
          uint64_t* slot = nullptr;
          if (what[j].first == gpu && b != a) slot = &nv.gpu_gpu[a * G + b];
          if (what[j].first == nvswitch) slot = &nv.gpu_switch[a * S + b];
          if (what[j].first == package) slot = &nv.gpu_cpu[a * P + b];
          if (slot) *slot = std::max(*slot, v);
        }
      }
      hwloc_distances_release(topo_, d);
    }
  }

  static std::string short_vendor(const std::string& v) {
    if (v.rfind("NVIDIA", 0) == 0) return "NVIDIA";
    if (v.rfind("Advanced Micro Devices", 0) == 0 || v.rfind("AMD", 0) == 0) return "AMD";
    if (v.rfind("Intel", 0) == 0) return "Intel";
    return v;
  }

  hwloc_topology_t topo_;
  HostTopology& t_;
  std::map<hwloc_obj_t, int> pci_index_;
  std::map<hwloc_obj_t, std::string> gpu_of_osdev_;
  std::map<hwloc_obj_t, int> gpu_by_obj_;
};

std::string errno_text(int e) { return e ? std::strerror(e) : "unknown error"; }

// hwloc writes some complaints to stderr itself; for a file we check what we can first so
// that the error names the file and says what is wrong.
void check_head(std::string_view head, const std::string& path) {
  if (head.find("<topology") == std::string_view::npos)
    throw TopologyError(ErrorKind::invalid_argument, path,
                        "topology file '" + path +
                            "': not an hwloc XML topology (no <topology> element "
                            "at its start; write one with `lstopo FILE.xml`)");
}

void check_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw TopologyError(ErrorKind::invalid_argument, path,
                        "topology file '" + path + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    throw TopologyError(ErrorKind::invalid_argument, path,
                        "topology file '" + path + "': not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw TopologyError(ErrorKind::invalid_argument, path,
                        "topology file '" + path + "': cannot be read: " + errno_text(errno));
  char head[4096] = {};
  in.read(head, sizeof head - 1);
  check_head(std::string_view(head, static_cast<size_t>(in.gcount())), path);
}

// Where a topology comes from: this machine (neither set), an XML file, or XML text.
struct Source {
  const std::string* file = nullptr;
  const std::string_view* xml = nullptr;
  std::string name;  // the file's path, or what the text is called in errors
};

// Sets where `raw` reads from (nothing to set for this machine) and what it keeps; 0 or
// hwloc's error.
int set_source(hwloc_topology_t raw, const Source& src) {
  // Every bridge, PCI device and OS device: paths are measured on the full PCI tree.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (src.file) return hwloc_topology_set_xml(raw, src.file->c_str());
  // hwloc's length counts a terminating NUL.
  if (src.xml) return hwloc_topology_set_xmlbuffer(raw, src.xml->data(), static_cast<int>(src.xml->size()) + 1);
  return 0;
}

// hwloc 2.9 itself dies on some malformed files (SIGSEGV on a Machine object without
// complete_cpuset; lstopo too, found by tests/fuzz): such a file is read first in a child
// process, so that it becomes an error naming the file rather than a crash of the program.
void check_hwloc_survives(const Source& src) {
  pid_t pid = ::fork();
  if (pid < 0) return;  // cannot check: reading it here fails as it would have anyway
  if (pid == 0) {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);  // no handler's report
    hwloc_topology_t raw = nullptr;
    bool ok = hwloc_topology_init(&raw) == 0 && set_source(raw, src) == 0 && hwloc_topology_load(raw) == 0;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    throw TopologyError(ErrorKind::invalid_argument, src.name,
                        "topology file '" + src.name + "' is malformed: hwloc crashed reading it (" +
                            strsignal(WTERMSIG(status)) + "; `lstopo-no-graphics -i FILE` does the same)");
}

// hwloc loads its plugins (PCI discovery through libpciaccess, libxml2) with its first
// topology and unloads them with its last. One topology kept for the process's life keeps
// them: no dlopen on every load (a fifth of a small file's load), and libpciaccess's
// allocations stay reachable instead of going with its unloaded code, which LeakSanitizer
// reports as leaks of an unknown module.
void keep_plugins_loaded() {
  static const hwloc_topology_t kept = [] {
    hwloc_topology_t t = nullptr;
    hwloc_topology_init(&t);
    return t;
  }();
  (void)kept;
}

HostTopology load(const Source& src) {
  keep_plugins_loaded();
  const std::string* file = src.file || src.xml ? &src.name : nullptr;
  if (src.file) check_file(*src.file);
  if (src.xml) check_head(src.xml->substr(0, 4095), src.name);
  if (file) check_hwloc_survives(src);
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    throw TopologyError(ErrorKind::system, file ? *file : "",
                        "hwloc_topology_init failed: " + errno_text(errno));
  TopologyPtr topo(raw);
  errno = 0;
  if (set_source(raw, src) != 0)
    throw TopologyError(ErrorKind::invalid_argument, *file,
                        "topology file '" + *file + "' is not a valid hwloc XML topology (hwloc: " +
                            errno_text(errno) + "; HWLOC_XML_VERBOSE=1 shows why)");
  errno = 0;
  if (hwloc_topology_load(raw) != 0) {
    if (file)
      throw TopologyError(ErrorKind::invalid_argument, *file,
                          "topology file '" + *file + "' is not a valid hwloc XML topology (hwloc: " +
                              errno_text(errno) + "; HWLOC_XML_VERBOSE=1 shows why)");
    throw TopologyError(ErrorKind::system, "", "hwloc could not discover this machine: " + errno_text(errno));
  }
  HostTopology t;
  if (file) {
    t.source = *file;
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    t.source = std::string("this machine (") + host + ")";
  }
  Loader(raw, t).run();
  derive(t);
  if (hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PCI_DEVICE) == 0 && !file)
    t.notes.push_back(
        "hwloc found no PCI devices (is /sys/bus/pci hidden, as in some containers?): "
        "GPUs and NICs cannot be placed");
  STRATA_INFO("topology: %s: %zu packages, %zu NUMA nodes, %zu GPUs, %zu NICs", t.source.c_str(),
              t.packages.size(), t.numa_nodes.size(), t.gpus.size(), t.nics.size());
  return t;
}

}  // namespace

HostTopology load_live_topology() { return load({}); }

HostTopology load_topology_file(const std::string& path) { return load({&path, nullptr, path}); }

HostTopology load_topology_xml(std::string_view xml, const std::string& name) {
  // hwloc's buffer ends at a NUL, which it must find where the length says.
  std::string text(xml.substr(0, xml.find('\0')));
  if (text.size() >= (1u << 30))
    throw TopologyError(ErrorKind::invalid_argument, name, "topology '" + name + "': larger than 1 GiB");
  std::string_view view(text);
  return load({nullptr, &view, name});
}

HostTopology load_host_topology() {
  if (auto path = settings::raw("STRATA_TOPO_FILE")) return load_topology_file(*path);
  return load_live_topology();
}

}  // namespace strata::topo
