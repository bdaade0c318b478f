// Runs strata-train (alone or under strata-run) and reads its output: the loss printed for
// each step, validation losses, and each rank's parameter checksum.
#pragma once

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/process.hpp"

namespace train_test {

// Golden runs: a layout that only changes the order of reductions gives the reference's
// printed losses within this relative difference.
inline constexpr double kLossRel = 1e-5;

// A rank's closing line under model parallelism: where it sits and what it holds.
struct RankEnd {
  int tp = 0, pp = 0, dp = 0;
  std::string checksum, replicated;
  std::string tied;  // the rank's piece of the tied embedding, where it holds one
};

struct TrainRun {
  strata_test::ProcResult proc;
  std::map<int, std::string> loss;      // step -> loss as printed ("%.6f")
  std::map<int, std::string> val_loss;  // step -> validation loss as printed
  std::vector<std::string> checksums;   // one per rank that finished
  std::vector<RankEnd> ranks;           // model parallel: one per rank that finished
  std::vector<std::string> outer;       // DiLoCo's "outer sync: ..." summary line, if any
  std::string command;
  bool ok() const { return proc.exited && proc.exit_code == 0 && !proc.killed_by_deadline; }
  std::string describe() const {
    return "command: " + command + "\n" + proc.describe() + "\noutput:\n" +
           strata_test::tail(proc.out);
  }
};

// ranks == 0: strata-train on its own (no launcher, no STRATA_RANK). `env`: added settings.
inline TrainRun run_train(int ranks, const std::vector<std::string>& args, double deadline_s = 90,
                          std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv;
  if (ranks > 0) argv = {STRATA_RUN_PATH, "-n", std::to_string(ranks), "--"};
  argv.push_back(STRATA_TRAIN_PATH);
  argv.insert(argv.end(), args.begin(), args.end());
  TrainRun r;
  for (auto& a : argv) r.command += a + " ";
  env.emplace("STRATA_TIMEOUT", "60");
  r.proc = strata_test::run_one(argv, env, deadline_s);
  std::istringstream in(r.proc.out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) line = line.substr(line.find("] ") + 2);  // strata-run's prefix
    int step = 0;
    char buf[64];
    if (std::sscanf(line.c_str(), "step %d/%*d | loss %63s", &step, buf) == 2)
      r.loss[step] = buf;
    else if (std::sscanf(line.c_str(), "step %d | val loss %63s", &step, buf) == 2)
      r.val_loss[step] = buf;
    else if (std::sscanf(line.c_str(), "rank %*d parameter checksum %63s", buf) == 1) {
      r.checksums.push_back(buf);
      RankEnd e;
      char rep[64];
      if (std::sscanf(line.c_str(), "rank %*d parameter checksum %*s | tp %d pp %d dp %d | replicated %63s",
                      &e.tp, &e.pp, &e.dp, rep) == 4) {
        e.checksum = buf;
        e.replicated = rep;
        if (const size_t at = line.find("| tied embedding "); at != std::string::npos)
          e.tied = line.substr(at + 17, 16);
        r.ranks.push_back(e);
      }
    }
    else if (line.starts_with("outer sync: "))
      r.outer.push_back(line);
  }
  return r;
}

// "step N/M | loss X" and "step N | val loss X" lines of one rank's output, keyed "N" and
// "vN" (a step printed twice keeps its last value).
inline std::map<std::string, std::string> losses(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    int step = 0;
    char buf[64];
    if (std::sscanf(line.c_str(), "step %d/%*d | loss %63s", &step, buf) == 2) m[std::to_string(step)] = buf;
    if (std::sscanf(line.c_str(), "step %d | val loss %63s", &step, buf) == 2) m["v" + std::to_string(step)] = buf;
  }
  return m;
}

inline std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Relative difference of two printed numbers.
inline double rel_diff(const std::string& a, const std::string& b) {
  double x = std::atof(a.c_str()), y = std::atof(b.c_str());
  return std::fabs(x - y) / std::max(1e-12, std::fabs(y));
}

inline std::string make_temp_dir(const std::string& tag) {
  std::string t = "/tmp/strata-train-test-" + tag + "-XXXXXX";
  std::vector<char> b(t.begin(), t.end());
  b.push_back('\0');
  return mkdtemp(b.data()) ? std::string(b.data()) : std::string();
}

inline void remove_tree(const std::string& dir);

// A temporary directory, removed with everything in it at the end of the scope.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag = "run") : path(make_temp_dir(tag)) {}
  ~TempDir() { remove_tree(path); }
};

// "--tp 2 --pp 2" -> {"--tp", "2", "--pp", "2"}
inline std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A run stopped after step `stop` (`first`) and resumed to the end (`second`) printed the
// uninterrupted run's losses, bit for bit, and its last validation loss.
inline void expect_resumed_bitwise(const TrainRun& first, const TrainRun& second, const TrainRun& full, int stop) {
  ASSERT_EQ(second.loss.begin()->first, stop + 1) << second.describe();
  for (const auto& [s, loss] : full.loss) {
    const TrainRun& part = s <= stop ? first : second;
    ASSERT_TRUE(part.loss.count(s)) << "step " << s;
    EXPECT_EQ(part.loss.at(s), loss) << "step " << s;
  }
  EXPECT_EQ(second.val_loss.rbegin()->second, full.val_loss.rbegin()->second);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

// Every entry of a directory (one level) with its bytes: equal snapshots mean nothing in
// it was created, removed or modified.
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> s;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") s[n] = read_file(dir + "/" + n);
    }
    closedir(d);
  }
  return s;
}

inline void remove_tree(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::perror("rm -rf");
}

}  // namespace train_test
