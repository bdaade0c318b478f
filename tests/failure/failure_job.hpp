// Jobs whose ranks are spawned one process each (not through strata-run, which would stop
// the survivors), and the helpers that read what each rank reported. Shared by the failure
// tests of every transport.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "launcher/root_port.hpp"
#include "tests/common/process.hpp"
#include "transports/shm/shm_names.hpp"

namespace strata_test {

// A free TCP port on 127.0.0.1 for rank 0, as strata-run picks it (launcher/root_port.hpp).
inline int free_port() { return strata::launcher::pick_root_port(); }

// RELIABILITY_TRIALS if set (at least 1: a test never passes having tried nothing), else
// `fallback`.
inline int reliability_trials(int fallback) {
  const char* t = getenv("RELIABILITY_TRIALS");
  return t ? std::max(1, atoi(t)) : fallback;
}

inline std::string random_secret_hex() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s += hex[rd() % 16];
  return s;
}

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

// The ranks of a job as strata-run would start them, without strata-run: rank r gets
// `env`, then per_rank[r] (if any), then the bootstrap variables.
struct JobSpecs {
  std::vector<SpawnSpec> ranks;
  std::string secret;
};
inline JobSpecs job_specs(const std::vector<std::string>& argv, int n, const std::map<std::string, std::string>& env,
                          const std::vector<std::map<std::string, std::string>>& per_rank) {
  int port = free_port();
  JobSpecs js{{}, random_secret_hex()};
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> e = env;
    if (r < static_cast<int>(per_rank.size())) e = with(e, per_rank[r]);
    e["STRATA_RANK"] = std::to_string(r);
    e["STRATA_WORLD_SIZE"] = std::to_string(n);
    e["STRATA_ROOT"] = "127.0.0.1:" + std::to_string(port);
    e["STRATA_SECRET"] = js.secret;
    js.ranks.push_back({argv, make_env(e), false});
  }
  return js;
}

inline Job spawn(const std::vector<std::string>& argv, int n, const std::map<std::string, std::string>& env,
                 const std::vector<std::map<std::string, std::string>>& per_rank, double deadline_s) {
  JobSpecs js = job_specs(argv, n, env, per_rank);
  Job j;
  double t0 = now_s();
  j.ranks = run_all(js.ranks, deadline_s);
  j.wall_s = now_s() - t0;
  // A rank killed before its peers mapped its shared-memory segment cannot unlink it;
  // remove the job's leftovers as strata-run does.
  strata::remove_job_segments(js.secret);
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

// A caught error's C++ class agrees with its kind(): a timeout, also one relayed by another
// rank, is catchable as TimeoutError, and nothing else is.
inline bool class_matches_kind(const std::string& caught) {
  return (field(caught, "class") == "TimeoutError") == (field(caught, "kind") == "timeout");
}

inline bool names_rank(const std::string& msg, int r) {
  std::regex re("(rank|peer)[^0-9a-z]{0,3}" + std::to_string(r) + "([^0-9]|$)", std::regex::icase);
  return std::regex_search(msg, re);
}

// Common checks for a survivor that caught an error: later calls throw promptly and
// destroy() returns.
// A survivor of a failed device call: its stream was released and its device still copies.
inline void check_device_usable(const ProcResult& p, int r) {
  EXPECT_FALSE(marker_line(p, "DEVICE-USABLE").empty()) << "rank " << r << ": the device did not work after the error\n"
                                                        << p.err;
}

inline void check_after_error(const ProcResult& p, int r) {
  std::string second = marker_line(p, "SECOND-CALL-THREW");
  EXPECT_FALSE(second.empty()) << "rank " << r << ": a call after the error did not throw\n" << p.err;
  if (!second.empty()) {
    EXPECT_LT(num(field(second, "after")), 2.0) << "rank " << r << ": " << second;
  }
  std::string third = marker_line(p, "THIRD-CALL-THREW");
  EXPECT_FALSE(third.empty()) << "rank " << r << ": barrier after the error did not throw\n" << p.err;
  std::string d = marker_line(p, "DESTROY-RETURNED");
  if (d.empty()) d = marker_line(p, "DESTROY-THREW");
  EXPECT_FALSE(d.empty()) << "rank " << r << ": destroy() after the error did not return\n" << p.err;
  if (!d.empty()) {
    EXPECT_LT(num(field(d, "after")), 5.0) << "rank " << r << ": " << d;
  }
}

#ifdef STRATA_FAILURE_WORKER_PATH  // the tests that run strata-failure-worker
// Rank 2 of 4 SIGKILLs itself ~100 ms into a loop of 64 MiB all_reduces: every survivor
// must catch a PeerError/TimeoutError naming rank 2 within 10 s (STRATA_TIMEOUT is 20),
// later calls must throw and destroy() must return. `env` for every rank, `per_rank` on top.
// `mode`: the worker's (killed, or device-killed: then each survivor's device must still
// work afterwards).
inline void expect_killed_rank_reported(const std::map<std::string, std::string>& env,
                                        const std::vector<std::map<std::string, std::string>>& per_rank,
                                        const std::string& mode = "killed") {
  const int T = 20, n = 4;
  Job j = spawn({sibling_program(STRATA_FAILURE_WORKER_PATH), mode}, n, with(env, {{"STRATA_TIMEOUT", std::to_string(T)}}),
                per_rank, T + 30);
  std::cout << "wall " << j.wall_s << " s\n";
  ASSERT_EQ(j.ranks.size(), size_t(n));
  EXPECT_EQ(j.ranks[2].term_signal, SIGKILL) << j.dump();
  for (int r : {0, 1, 3}) {
    const ProcResult& p = j.ranks[r];
    std::string caught = marker_line(p, "CAUGHT");
    std::cout << "rank " << r << ": " << p.describe() << "\n  " << caught << "\n  " << marker_line(p, "ITERATIONS")
              << "\n";
    EXPECT_FALSE(p.killed_by_deadline) << "rank " << r << " hung\n" << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code == 3) << "rank " << r << ": " << p.describe() << "\n" << j.dump();
    EXPECT_LT(p.elapsed_s, T + 5.0) << "rank " << r << " took too long\n" << j.dump();
    ASSERT_FALSE(caught.empty()) << "rank " << r << " caught no strata::Error\n" << j.dump();
    std::string cls = field(caught, "class");
    EXPECT_TRUE(cls == "PeerError" || cls == "TimeoutError") << caught;
    EXPECT_TRUE(class_matches_kind(caught)) << caught;
    // The library aims to name the dead peer on every survivor.
    EXPECT_TRUE(names_rank(field(caught, "msg"), 2)) << "rank " << r << ": message does not name rank 2: " << caught;
    EXPECT_EQ(field(caught, "peer"), "2") << "rank " << r << ": PeerError::peer() is not 2: " << caught;
    EXPECT_LT(num(field(caught, "after")), 10.0) << "rank " << r << " noticed late: " << caught;
    if (mode.rfind("device", 0) == 0) check_device_usable(p, r);
    check_after_error(p, r);
  }
}
#endif

}  // namespace strata_test
