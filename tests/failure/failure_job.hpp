// Jobs whose ranks are spawned one process each (not through strata-run, which would stop
// the survivors), and the helpers that read what each rank reported. Shared by the failure
// tests of every transport.
#pragma once

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "test_proc.hpp"
#include "transports/shm/shm_names.hpp"

namespace strata_test {

inline std::map<std::string, std::string> with(std::map<std::string, std::string> a,
                                               const std::map<std::string, std::string>& b) {
  for (auto& [k, v] : b) a[k] = v;
  return a;
}

struct Job {
  std::vector<ProcResult> ranks;
  double wall_s = 0;
  std::string dump() const {
    std::string s;
    for (size_t r = 0; r < ranks.size(); ++r)
      s += "---- rank " + std::to_string(r) + ": " + ranks[r].describe() + "\n" + tail(ranks[r].err + ranks[r].out, 3000);
    return s;
  }
};

// Rank r gets `env`, then per_rank[r] (if any), then the bootstrap variables.
inline Job spawn(const std::vector<std::string>& argv, int n, const std::map<std::string, std::string>& env,
                 const std::vector<std::map<std::string, std::string>>& per_rank, double deadline_s) {
  int port = free_port();
  std::string secret = random_secret_hex();
  std::vector<SpawnSpec> specs;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> e = env;
    if (r < static_cast<int>(per_rank.size())) e = with(e, per_rank[r]);
    e["STRATA_RANK"] = std::to_string(r);
    e["STRATA_WORLD_SIZE"] = std::to_string(n);
    e["STRATA_ROOT"] = "127.0.0.1:" + std::to_string(port);
    e["STRATA_SECRET"] = secret;
    specs.push_back({argv, make_env(e), false});
  }
  Job j;
  double t0 = now_s();
  j.ranks = run_all(specs, deadline_s);
  j.wall_s = now_s() - t0;
  // A rank killed before its peers mapped its shared-memory segment cannot unlink it;
  // remove the job's leftovers as strata-run does.
  strata::remove_job_segments(secret);
  return j;
}

// The first stderr line starting with `marker`, or "".
inline std::string marker_line(const ProcResult& p, const std::string& marker) {
  for (auto& l : lines_containing(p.err, marker))
    if (l.rfind(marker, 0) == 0) return l;
  return "";
}

// The value of " key=value" in a marker line; "msg" runs to the end of the line.
inline std::string field(const std::string& line, const std::string& key) {
  auto k = line.find(" " + key + "=");
  if (k == std::string::npos) return "";
  k += key.size() + 2;
  if (key == "msg") return line.substr(k);
  return line.substr(k, line.find(' ', k) - k);
}

inline double num(const std::string& s) { return s.empty() ? -1 : std::stod(s); }

inline bool names_rank(const std::string& msg, int r) {
  std::regex re("(rank|peer)[^0-9a-z]{0,3}" + std::to_string(r) + "([^0-9]|$)", std::regex::icase);
  return std::regex_search(msg, re);
}

}  // namespace strata_test
