#include "algorithms/hierarchy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "strata/error.hpp"

namespace strata {

std::vector<int> Hierarchy::members(int level, int r) const {
  std::vector<int> out;
  const Level& l = levels[static_cast<size_t>(level)];
  for (int q = 0; q < nranks; ++q)
    if (l.group[q] == l.group[r]) out.push_back(q);
  return out;
}

std::string Hierarchy::describe() const {
  std::ostringstream o;
  for (const Level& l : levels) {
    o << l.name << ": " << l.ngroups << " groups [";
    for (int g = 0; g < l.ngroups; ++g) {
      o << (g ? " | " : "");
      bool first = true;
      for (int r = 0; r < nranks; ++r)
        if (l.group[r] == g) o << (first ? "" : ",") << r, first = false;
    }
    o << "], link " << l.link.latency_s * 1e6 << " us, " << l.link.bandwidth_Bps / 1e9 << " GB/s; ";
  }
  o << "top link " << top.latency_s * 1e6 << " us, " << top.bandwidth_Bps / 1e9 << " GB/s";
  return o.str();
}

std::vector<LevelSpec> parse_hierarchy_spec(const std::string& spec) {
  std::vector<LevelSpec> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t colon = item.find(':');
    char* end = nullptr;
    long size = colon == std::string::npos ? 0 : std::strtol(item.c_str() + colon + 1, &end, 10);
    // Sizes beyond a job's rank limit (2^24) are refused: cast to int, 2^32 became 0, a divisor.
    if (colon == std::string::npos || colon == 0 || !end || *end || size < 1 || size > (1 << 24))
      throw InvalidArgument("STRATA_HIERARCHY: '" + item +
                            "' is not name:size with size in [1, 16777216] (e.g. node:2,island:2)");
    out.push_back({item.substr(0, colon), static_cast<int>(size)});
  }
  return out;
}

int emulated_node(const std::vector<LevelSpec>& spec, int rank) {
  if (spec.empty() || spec[0].name != "node") return -1;
  return rank / spec[0].size;
}

namespace {

// Parses "1us", "0.5ms", "2s" and "6GB", "125MB", "1.5GB" (bytes per second).
double parse_unit(const std::string& s, bool time) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string u = end ? end : "";
  static const std::map<std::string, double> times{{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  static const std::map<std::string, double> rates{{"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  const auto& table = time ? times : rates;
  auto it = table.find(u);
  // A finite, positive figure: "1e999us" is an infinite latency.
  if (end == s.c_str() || it == table.end() || !(v > 0) || !std::isfinite(v * it->second))
    throw InvalidArgument("STRATA_LINK_MODEL: '" + s + "' is not a " + (time ? "time like 5us" : "rate like 1.25GB"));
  return v * it->second;
}

std::map<std::string, LinkModel> parse_link_models(const std::string& spec) {
  std::map<std::string, LinkModel> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t a = item.find(':'), b = a == std::string::npos ? a : item.find(':', a + 1);
    const size_t c = b == std::string::npos ? b : item.find(':', b + 1);
    if (b == std::string::npos || (c != std::string::npos && item.find(':', c + 1) != std::string::npos))
      throw InvalidArgument("STRATA_LINK_MODEL: '" + item +
                            "' is not level:latency:bandwidth or level:latency:bandwidth:overhead (e.g. node:1us:6GB)");
    LinkModel m{parse_unit(item.substr(a + 1, b - a - 1), true), parse_unit(item.substr(b + 1, c - b - 1), false)};
    if (c != std::string::npos) {
      const std::string o = item.substr(c + 1);
      m.overhead_s = o == "0" || o == "0s" ? 0 : parse_unit(o, true);  // no overhead is a figure too
    }
    out[item.substr(0, a)] = m;
  }
  return out;
}

// Group ids numbered by first appearance, so group order follows rank order.
std::vector<int> number_groups(const std::vector<std::string>& keys, int* ngroups) {
  std::map<std::string, int> ids;
  std::vector<int> out;
  for (const auto& k : keys) {
    auto it = ids.emplace(k, static_cast<int>(ids.size())).first;
    out.push_back(it->second);
  }
  *ngroups = static_cast<int>(ids.size());
  return out;
}

}  // namespace

Hierarchy build_hierarchy(const std::vector<std::string>& hosts, const std::vector<LevelSpec>& spec,
                          const std::string& link_model_spec, bool node_over_tcp) {
  Hierarchy h;
  h.nranks = static_cast<int>(hosts.size());
  auto models = parse_link_models(link_model_spec);
  auto model_for = [&](const std::string& name, LinkModel fallback) {
    auto it = models.find(name);
    return it == models.end() ? fallback : it->second;
  };
  const LinkModel in_node = node_over_tcp ? kHostTcpLink : kShmLink, net = kNetLink;

  Level node;
  node.name = "node";
  size_t next = 0;
  if (!spec.empty() && spec[0].name == "node") {
    std::vector<std::string> keys;
    for (int r = 0; r < h.nranks; ++r) keys.push_back(std::to_string(r / spec[0].size));
    node.group = number_groups(keys, &node.ngroups);
    next = 1;
  } else {
    node.group = number_groups(hosts, &node.ngroups);
  }
  node.link = model_for("node", in_node);
  h.levels.push_back(node);
  for (; next < spec.size(); ++next) {
    const Level& below = h.levels.back();
    Level l;
    l.name = spec[next].name;
    std::vector<std::string> keys;
    for (int r = 0; r < h.nranks; ++r) keys.push_back(std::to_string(below.group[r] / spec[next].size));
    l.group = number_groups(keys, &l.ngroups);
    l.link = model_for(l.name, net);
    h.levels.push_back(l);
  }
  h.top = model_for("top", h.levels.size() > 1 ? LinkModel{100e-6, 0.125e9} : net);
  h.device = model_for("device", h.device);
  return h;
}

Hierarchy restrict_hierarchy(const Hierarchy& h, const std::vector<int>& members) {
  Hierarchy r = h;
  r.nranks = static_cast<int>(members.size());
  for (Level& l : r.levels) {
    std::vector<std::string> keys;
    for (int m : members) keys.push_back(std::to_string(l.group[static_cast<size_t>(m)]));
    l.group = number_groups(keys, &l.ngroups);
  }
  return r;
}

bool oversubscribed(const std::vector<RankCpus>& ranks) {
  std::map<std::string, std::pair<int, std::vector<uint64_t>>> machines;  // ranks, union of masks
  for (const RankCpus& r : ranks) {
    auto& [count, cpus] = machines[r.machine];
    ++count;
    cpus.resize(std::max(cpus.size(), r.mask.size()));
    for (size_t w = 0; w < r.mask.size(); ++w) cpus[w] |= r.mask[w];
  }
  for (const auto& [machine, m] : machines) {
    int ncpus = 0;
    for (uint64_t w : m.second) ncpus += __builtin_popcountll(w);
    if (m.first > ncpus) return true;
  }
  return false;
}

}  // namespace strata
