#include "cluster.hpp"

#include "topology/topology.hpp"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata::sim {

namespace {

struct Unit {
  const char* name;
  double scale;
};

// A finite, positive number followed by one of `units` (compared without regard to case
// where `fold`); a bare number takes `bare` (0: not allowed).
bool parse_with_units(const std::string& s, const Unit* units, size_t n, double bare, bool fold, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v <= 0 || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.'))
    return false;
  const std::string unit(end);
  double scale = unit.empty() ? bare : 0;
  for (size_t i = 0; i < n && scale == 0; ++i)
    if (fold ? ::strcasecmp(unit.c_str(), units[i].name) == 0 : unit == units[i].name) scale = units[i].scale;
  if (scale == 0 || !std::isfinite(v * scale)) return false;
  *out = v * scale;
  return true;
}

}  // namespace

bool parse_rate(const std::string& s, double* out) {
  // Bytes per second: B/s, KB/s ... (powers of 1000), KiB/s ... (powers of 1024). Bits
  // per second: bit/s, kbit/s ... and tc's spelling without "/s" (kbit, mbit, gbit), in
  // any case as tc takes them. tc's "mbps" (megabytes) is not taken: too easily misread.
  static const Unit bytes[] = {{"B/s", 1},          {"KB/s", 1e3},       {"MB/s", 1e6},
                               {"GB/s", 1e9},       {"TB/s", 1e12},      {"KiB/s", 1024.0},
                               {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}};
  static const Unit bits[] = {{"bit/s", 0.125},  {"kbit/s", 125.0},  {"mbit/s", 125e3}, {"gbit/s", 125e6},
                              {"tbit/s", 125e9}, {"bit", 0.125},     {"kbit", 125.0},   {"mbit", 125e3},
                              {"gbit", 125e6},   {"tbit", 125e9}};
  return parse_with_units(s, bytes, std::size(bytes), 0, false, out) ||
         parse_with_units(s, bits, std::size(bits), 0, true, out);
}

bool parse_time(const std::string& s, double* out) {
  static const Unit units[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  return parse_with_units(s, units, std::size(units), 0, false, out);
}

bool parse_bytes(const std::string& s, double* out) {
  static const Unit units[] = {{"B", 1},      {"KB", 1e3},         {"MB", 1e6},           {"GB", 1e9},
                               {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"K", 1024.0},
                               {"M", 1048576.0}, {"G", 1073741824.0}};
  return parse_with_units(s, units, std::size(units), 1, false, out);
}

namespace {

class Parser {
 public:
  Parser(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw ClusterError(source_ + (line ? ":" + std::to_string(line) : "") + ": " + what);
  }

  double rate(int line, const std::string& key, const std::string& v) const {
    double x;
    if (!parse_rate(v, &x)) fail(line, key + " '" + v + "' is not a rate like 50GB/s, 400Gbit/s or 1gbit");
    return x;
  }
  double time(int line, const std::string& key, const std::string& v) const {
    double x;
    if (!parse_time(v, &x)) fail(line, key + " '" + v + "' is not a time like 2us or 0.5ms");
    return x;
  }
  double bytes(int line, const std::string& key, const std::string& v) const {
    double x;
    if (!parse_bytes(v, &x)) fail(line, key + " '" + v + "' is not a size like 65536, 500KB or 4MiB");
    return x;
  }
  long integer(int line, const std::string& key, const std::string& v, long lo, long hi) const {
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || x < lo || x > hi)
      fail(line, key + " '" + v + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  double number(int line, const std::string& key, const std::string& v, double lo, double hi) const {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(x >= lo && x <= hi))
      fail(line, key + " '" + v + "' is not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }

  LevelDesc level(int line, const std::vector<std::string>& w, size_t index) {
    LevelDesc l;
    l.line = line;
    if (w.size() < 2) fail(line, "a level needs a name: level NAME size N bandwidth RATE latency TIME");
    l.name = w[1];
    // Levels are named to the library as STRATA_HIERARCHY and STRATA_LINK_MODEL name them.
    if (l.name.find_first_of(":,") != std::string::npos)
      fail(line, "level '" + l.name + "': a level's name has no ':' or ','");
    double efficiency = 1;
    bool has_size = false, has_bw = false, has_lat = false, has_links = false;
    std::string hwloc;
    for (size_t i = 2; i < w.size(); ++i) {
      const std::string& k = w[i];
      if (k == "forwards") {
        if (index != 0) fail(line, "only the innermost level's links may forward reductions");
        l.forwards = true;
        continue;
      }
      if (i + 1 >= w.size()) fail(line, "'" + k + "' needs a value");
      const std::string& v = w[++i];
      if (k == "size") l.size = static_cast<int>(integer(line, k, v, 1, 1 << 24)), has_size = true;
      else if (k == "bandwidth") l.bandwidth_Bps = rate(line, k, v), has_bw = true;
      else if (k == "latency") l.latency_s = time(line, k, v), has_lat = true;
      else if (k == "links") l.links = static_cast<int>(integer(line, k, v, 1, 1 << 20)), has_links = true;
      else if (k == "oversubscription") l.oversubscription = number(line, k, v, 1e-3, 1e6);
      else if (k == "efficiency") efficiency = number(line, k, v, 1e-3, 1);
      else if (k == "burst") l.burst_bytes = bytes(line, k, v);
      else if (k == "peak") l.peak_Bps = rate(line, k, v);
      else if (k == "buffer") l.buffer_bytes = bytes(line, k, v);
      else if (k == "overhead") l.overhead_s = v == "0" ? 0 : time(line, k, v);
      else if (k == "hwloc" && index == 0) hwloc = v;
      else
        fail(line, "'" + k + "' is not a level setting (size, bandwidth, latency, links, oversubscription, "
                             "efficiency, burst, peak, buffer, overhead, forwards; hwloc on the innermost level)");
    }
    if (!hwloc.empty()) {  // what the machine's file gives, unless the line says otherwise
      node_from_hwloc(line, hwloc, has_size, has_bw);
      if (!has_size) l.size = hwloc_size_, has_size = true;
      if (!has_bw) l.bandwidth_Bps = hwloc_Bps_, has_bw = true;
    }
    if (!has_size && index == 0) fail(line, "level '" + l.name + "' needs its size (ranks per group)");
    if (!has_bw) fail(line, "level '" + l.name + "' needs a bandwidth");
    if (!has_lat) fail(line, "level '" + l.name + "' needs a latency");
    if (index == 0 && (has_links || l.oversubscription))
      fail(line, "the innermost level has a port per rank: links and oversubscription belong to the levels above");
    if (index == 1 && l.oversubscription)
      fail(line, "oversubscription needs a level below with links to oversubscribe: give this level links N");
    if (has_links && l.oversubscription) fail(line, "give links or oversubscription, not both");
    if ((l.burst_bytes > 0) != (l.peak_Bps > 0)) fail(line, "a token bucket needs both burst and peak");
    if (l.peak_Bps && l.peak_Bps < l.bandwidth_Bps) fail(line, "peak is below the bandwidth");
    l.bandwidth_Bps *= efficiency;
    l.peak_Bps *= efficiency;
    if (!has_size) l.size = 0;  // the outermost level may be sized by `ranks`
    if (index == 1 && !has_links && hwloc_nics_) l.links = hwloc_nics_;  // a node's RDMA NICs
    return l;
  }

  // `hwloc FILE` on the innermost level: one node is the machine an hwloc XML describes
  // (a path relative to the cluster file): a rank per GPU, the slowest GPU-GPU NVLink
  // bandwidth, and its RDMA NICs as the next level's links.
  void node_from_hwloc(int line, const std::string& file, bool has_size, bool has_bw) {
    const size_t slash = source_.find_last_of('/');
    const std::string path = file[0] == '/' || slash == std::string::npos ? file : source_.substr(0, slash + 1) + file;
    topo::HostTopology t;
    try {
      t = topo::load_topology_file(path);
    } catch (const std::exception& e) {
      fail(line, e.what());
    }
    const int g = static_cast<int>(t.gpus.size());
    if (g == 0 && !has_size) fail(line, path + " has no GPU: give the level its size");
    double slowest = HUGE_VAL;
    for (int a = 0; a < g; ++a)
      for (int b = 0; b < g; ++b)
        if (a != b) slowest = std::min(slowest, static_cast<double>(t.nvlink_bandwidth(a, b)) * 1e6);
    if (g > 1 && slowest == 0 && !has_bw)
      fail(line, path + ": some GPUs share no NVLink (PCIe only, not in the file): give the level its bandwidth");
    hwloc_size_ = g;
    hwloc_Bps_ = g > 1 ? slowest : 0;
    hwloc_nics_ = 0;
    for (const topo::Nic& n : t.nics) hwloc_nics_ += n.rdma();
  }

 private:
  std::string source_;
  int hwloc_size_ = 0, hwloc_nics_ = 0;  // the innermost level's machine, when given
  double hwloc_Bps_ = 0;
};

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> w;
  std::istringstream in(line.substr(0, line.find('#')));
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

}  // namespace

Cluster parse_cluster(const std::string& text, const std::string& source) {
  Parser p(source);
  Cluster c;
  c.source = source;
  const size_t slash = source.find_last_of('/');
  c.name = source.substr(slash == std::string::npos ? 0 : slash + 1);
  long ranks = 0;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    const std::string& k = w[0];
    if (k == "level") {
      c.levels.push_back(p.level(n, w, c.levels.size()));
      for (size_t i = 0; i + 1 < c.levels.size(); ++i)
        if (c.levels[i].name == c.levels.back().name) p.fail(n, "level '" + c.levels.back().name + "' is declared twice");
      if (c.levels.back().size == 0 && c.levels.size() > 1 && c.levels[c.levels.size() - 2].size == 0)
        p.fail(c.levels[c.levels.size() - 2].line, "only the outermost level may leave out its size");
      continue;
    }
    if (k == "oversubscribed") {
      if (w.size() != 1) p.fail(n, "'oversubscribed' takes no value");
      c.oversubscribed = true;
      continue;
    }
    if (w.size() != 2) p.fail(n, "'" + k + "' takes one value");
    const std::string& v = w[1];
    if (k == "hierarchy") {
      if (v != "all" && v != "nodes") p.fail(n, "hierarchy '" + v + "' is not 'all' (every level) or 'nodes'");
      c.hierarchy_all = v == "all";
    } else if (k == "memory") {
      if (v != "host" && v != "device") p.fail(n, "memory '" + v + "' is not 'host' or 'device'");
      c.memory = v == "host" ? MemoryKind::host : MemoryKind::device;
    } else if (k == "link_model") {
      c.link_model = v, c.link_model_line = n;
    } else if (k == "name") c.name = v;
    else if (k == "ranks") ranks = p.integer(n, k, v, 1, 1 << 24), c.ranks_line = n;
    else if (k == "copy") c.copy_Bps = p.rate(n, k, v);
    else if (k == "reduce") c.reduce_Bps = p.rate(n, k, v);
    else if (k == "eager") c.eager_bytes = p.bytes(n, k, v);
    else
      p.fail(n, "'" + k + "' is not a cluster setting (name, ranks, level, copy, reduce, eager, oversubscribed, "
                "hierarchy, link_model, memory)");
  }
  if (c.levels.empty()) p.fail(n, "no levels: a cluster needs at least 'level node size N bandwidth RATE latency TIME'");
  LevelDesc& top = c.levels.back();
  if (top.size == 0) {
    if (!ranks) p.fail(top.line, "level '" + top.name + "' needs its size, or the file a 'ranks N' line");
    top.size = 1;
    resize_cluster(c, ranks);
  } else if (ranks && ranks != c.nranks()) {
    p.fail(c.ranks_line, "ranks " + std::to_string(ranks) + " but the levels make " + std::to_string(c.nranks()));
  }
  for (size_t i = 1; i + 1 < c.levels.size(); ++i) {
    const std::string& name = c.levels[i].name;
    if (name == "node" || name == "top" || name == "device")
      p.fail(c.levels[i].line, "level '" + name + "': STRATA_LINK_MODEL's names node, top and device are the innermost "
                               "level, the outermost links and device buffers; name this level otherwise");
  }
  if (c.link_model_line) {
    try {
      c.hierarchy();
    } catch (const std::exception& e) {
      p.fail(c.link_model_line, e.what());
    }
  }
  return c;
}

Cluster load_cluster(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ClusterError(path + ": cannot read the cluster file");
  std::stringstream s;
  s << f.rdbuf();
  return parse_cluster(s.str(), path);
}

void resize_cluster(Cluster& c, long nranks) {
  LevelDesc& top = c.levels.back();
  const long below = c.levels.size() > 1 ? c.ranks_per_group(c.levels.size() - 2) : 1;
  if (nranks < 1 || nranks % below != 0 || nranks / below > (1 << 24))
    throw ClusterError(c.source + ":" + std::to_string(top.line) + ": " + std::to_string(nranks) +
                       " ranks do not divide into groups of " + std::to_string(below) + " (the levels below '" +
                       top.name + "')");
  top.size = static_cast<int>(nranks / below);
}

int Cluster::ranks_per_group(size_t level) const {
  long n = 1;
  for (size_t i = 0; i <= level && i < levels.size(); ++i) n *= levels[i].size;
  return static_cast<int>(n);
}

int Cluster::nranks() const { return ranks_per_group(levels.size() - 1); }

size_t Cluster::common_level(int a, int b) const {
  size_t i = 0;
  while (i + 1 < levels.size() && group_of(a, i) != group_of(b, i)) ++i;
  return i;
}

double Cluster::uplink_Bps(size_t level) const {
  const LevelDesc& l = levels[level];
  if (level < 2 || !l.oversubscription) return l.links * l.bandwidth_Bps;
  return levels[level - 1].size * uplink_Bps(level - 1) / l.oversubscription;
}

namespace {

// A figure as STRATA_LINK_MODEL writes it, exactly ("%.17g" reads back as the same double).
std::string exact(double v, const char* unit) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g%s", v, unit);
  return b;
}

}  // namespace

LibraryInputs Cluster::library_inputs() const {
  LibraryInputs in;
  const int n = nranks(), per_node = ranks_per_group(0);
  // A node is a host. Oversubscribed: every rank on one machine with one CPU (the emulated
  // cluster: network namespaces on one machine); else a machine per node, a CPU per rank.
  for (int r = 0; r < n; ++r) {
    in.hosts.push_back("node" + std::to_string(group_of(r, 0)));
    RankCpus cpus{oversubscribed ? "machine" : in.hosts.back(), {}};
    const int cpu = oversubscribed ? 0 : r % per_node;
    cpus.mask.assign(static_cast<size_t>(cpu / 64 + 1), 0);
    cpus.mask.back() = uint64_t{1} << (cpu % 64);
    in.cpus.push_back(std::move(cpus));
  }
  // The levels between the node and the whole cluster, as STRATA_HIERARCHY names them.
  for (size_t i = 1; hierarchy_all && i + 1 < levels.size(); ++i)
    in.hierarchy += (in.hierarchy.empty() ? "" : ",") + levels[i].name + ":" + std::to_string(levels[i].size);
  if (link_model != "cluster") {
    in.link_model = link_model;
    return in;
  }
  // Per node above level 0: the least of its share of each uplink up to that level.
  double node_Bps = HUGE_VAL;
  for (size_t i = 0; i < levels.size(); ++i) {
    double Bps = levels[i].bandwidth_Bps;
    if (i > 0) Bps = node_Bps = std::min(node_Bps, uplink_Bps(i) * ranks_per_group(0) / ranks_per_group(i - 1));
    const std::string figures =
        exact(levels[i].latency_s, "s") + ":" + exact(Bps, "B") + ":" + (levels[i].overhead_s ? exact(levels[i].overhead_s, "s") : "0");
    std::string name = i == 0 ? "node" : i + 1 == levels.size() ? "top" : hierarchy_all ? levels[i].name : "";
    if (name.empty()) continue;  // not a level of the library's hierarchy
    in.link_model += (in.link_model.empty() ? "" : ",") + name + ":" + figures;
    if (i == 0) in.link_model += ",device:" + figures;
  }
  return in;
}

Hierarchy Cluster::hierarchy() const {
  // As a communicator's creation turns its bootstrap table and settings into its tuner's
  // view: hierarchy_of (build_hierarchy), then tuner_view (oversubscribed).
  const LibraryInputs in = library_inputs();
  Hierarchy h = build_hierarchy(in.hosts, parse_hierarchy_spec(in.hierarchy), in.link_model);
  h.oversubscribed = strata::oversubscribed(in.cpus);
  return h;
}

std::string Cluster::describe() const {
  std::ostringstream o;
  o << name << ": " << nranks() << " ranks;";
  for (size_t i = 0; i < levels.size(); ++i) {
    const LevelDesc& l = levels[i];
    o << " " << l.name << " " << l.size << (i ? " x " : " ranks, ") << l.latency_s * 1e6 << " us, ";
    if (i == 0) o << l.bandwidth_Bps / 1e9 << " GB/s per rank";
    else o << uplink_Bps(i) / 1e9 << " GB/s up per " << levels[i - 1].name;
    o << (i + 1 < levels.size() ? ";" : "");
  }
  return o.str();
}

}  // namespace strata::sim
