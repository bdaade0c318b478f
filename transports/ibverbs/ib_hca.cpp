#include "transports/ibverbs/ib_hca.hpp"

#include <cctype>

#include "strata/error.hpp"

namespace strata::ibverbs {

namespace {
std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}
}  // namespace

HcaFilter parse_hca_list(const std::string& spec, const char* var) {
  HcaFilter f;
  std::string s = trim(spec);
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(var) + "=" + spec + " is malformed: " + why +
                           " (expected [^][=]name[:port][,name[:port]...], e.g. mlx5_0:1,mlx5_1:1)");
  };
  if (!s.empty() && s[0] == '^') f.exclude = true, s = trim(s.substr(1));
  if (!s.empty() && s[0] == '=') f.exact = true, s = trim(s.substr(1));
  if (s.empty()) {
    if (f.exclude || f.exact) throw bad("no device after the prefix");
    return f;
  }
  size_t pos = 0;
  for (;;) {
    size_t comma = s.find(',', pos);
    std::string item = trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (item.empty()) throw bad("empty entry");
    HcaEntry e;
    size_t colon = item.find(':');
    e.name = trim(item.substr(0, colon));
    if (e.name.empty()) throw bad("entry '" + item + "' has no device name");
    for (char c : e.name)
      if (std::isspace(static_cast<unsigned char>(c)) || c == '^' || c == '=')
        throw bad("device name '" + e.name + "' contains '" + std::string(1, c) + "'");
    if (colon != std::string::npos) {
      std::string p = trim(item.substr(colon + 1));
      bool digits = !p.empty() && p.size() <= 3;
      for (char c : p) digits &= std::isdigit(static_cast<unsigned char>(c)) != 0;
      int port = digits ? std::stoi(p) : 0;
      if (!digits || port < 1 || port > 255) throw bad("port '" + p + "' of " + e.name + " is not an integer in [1, 255]");
      e.port = port;
    }
    f.entries.push_back(e);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return f;
}

bool hca_selected(const HcaFilter& f, const std::string& dev, int port) {
  if (f.entries.empty()) return true;
  bool listed = false;
  for (const HcaEntry& e : f.entries) {
    bool name_ok = f.exact ? dev == e.name : dev.compare(0, e.name.size(), e.name) == 0;
    if (name_ok && (e.port < 0 || e.port == port)) {
      listed = true;
      break;
    }
  }
  return f.exclude ? !listed : listed;
}

}  // namespace strata::ibverbs
