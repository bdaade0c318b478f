// The kill-and-stop matrix (issue 20): operations x transports x SIGKILL/SIGSTOP x strata-run's
// stopping of the other ranks on and off, each at a random moment of a loop of the
// operation, on a random rank of 4 (tests/failure/fault_worker.cpp). Each trial counts:
//
//   hang       a process still running at the harness's deadline
//   crash      a survivor that ended other than by its error (a signal, no error, ...), or
//              strata-run's status other than the fault's
//   reported   survivors that printed their error; their time from the fault to it, and
//              whether they named the rank that was signalled
//   leftovers  processes of the job alive after it ended (marked by FAULT_JOB in their
//              environment, their children included) and its /dev/shm segments
//
// "Stopping on" runs the job under strata-run, which stops every rank once one fails
// (SIGTERM to each rank's group, SIGCONT for a stopped one): survivors may end by that
// SIGTERM before they report. "Off" starts the ranks with the tests' process runner (as
// strata-run --keep-going would leave them): every survivor must report.
//
// The default suite runs a fixed handful of cells; FAULT_MATRIX=full runs every cell
// FAULT_TRIALS times (default 2) and prints the table docs/reliability.md quotes.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "failure_job.hpp"

using namespace strata_test;

namespace {

constexpr int kRanks = 4;
constexpr int kTimeout = 2;  // STRATA_TIMEOUT of the trials

const std::vector<std::string> kColls = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                         "reduce",     "all_to_all",     "send_recv",  "barrier"};
const std::vector<std::string> kTransports = {"shm", "tcp", "ucx_sm", "ucx_tcp"};

std::map<std::string, std::string> transport_env(const std::string& t) {
  if (t == "tcp") return {{"STRATA_TRANSPORT", "tcp"}};
  if (t == "ucx_sm") return {{"STRATA_TRANSPORT", "ucx"}, {"UCX_TLS", "sm,self"}};
  if (t == "ucx_tcp") return {{"STRATA_TRANSPORT", "ucx"}, {"UCX_TLS", "tcp,self"}, {"UCX_NET_DEVICES", "lo"}};
  return {};
}

struct Cell {
  std::string coll, transport;
  bool stop;        // SIGSTOP, else SIGKILL
  bool stopping;    // strata-run stops the others when a rank fails
  std::string name() const {
    return coll + "/" + transport + "/" + (stop ? "STOP" : "KILL") + "/" + (stopping ? "strata-run" : "direct");
  }
};

struct Tally {
  int trials = 0, hangs = 0, crashes = 0, survivors = 0, reported = 0, named_right = 0;
  int leftover_procs = 0, leftover_segs = 0;
  double worst_s = 0;  // from the fault to a survivor's error
  double worst_end_s = 0;  // from the fault to the end of the job (direct: of its last survivor)
  std::vector<std::string> problems;
  void add(const Tally& t) {
    trials += t.trials, hangs += t.hangs, crashes += t.crashes, survivors += t.survivors, reported += t.reported;
    named_right += t.named_right, leftover_procs += t.leftover_procs, leftover_segs += t.leftover_segs;
    worst_s = std::max(worst_s, t.worst_s), worst_end_s = std::max(worst_end_s, t.worst_end_s);
    problems.insert(problems.end(), t.problems.begin(), t.problems.end());
  }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Live (not zombie) processes whose environment holds `mark`; killed once counted.
int kill_marked(const std::string& mark) {
  int found = 0;
  DIR* d = opendir("/proc");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string stat = read_all("/proc/" + std::string(e->d_name) + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') continue;
    std::string env = read_all("/proc/" + std::string(e->d_name) + "/environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    if (("\n" + env).find("\n" + mark + "\n") == std::string::npos) continue;
    ++found;
    kill(pid, SIGKILL);
  }
  closedir(d);
  return found;
}

// /dev/shm entries of the job whose secret begins with `secret12`; removed once counted.
int remove_segments(const std::string& secret12) {
  if (secret12.size() != 12) return 0;
  const int before = [&] {
    int n = 0;
    if (DIR* d = opendir("/dev/shm")) {
      while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind(strata::shm_job_prefix(secret12), 0) == 0;
      closedir(d);
    }
    return n;
  }();
  strata::remove_job_segments(secret12);
  return before;
}

// Each rank's lines: stderr of a spawned rank, or strata-run's "[r] " lines.
std::vector<std::string> per_rank_text(const std::vector<ProcResult>& ranks) {
  std::vector<std::string> t;
  for (const ProcResult& p : ranks) t.push_back(p.err);
  return t;
}
std::vector<std::string> per_rank_text(const ProcResult& launcher) {
  std::vector<std::string> t(kRanks);
  std::istringstream in(launcher.out);
  for (std::string line; std::getline(in, line);) {
    int r = -1;
    if (std::sscanf(line.c_str(), "[%d] ", &r) == 1 && r >= 0 && r < kRanks) t[r] += line.substr(line.find("] ") + 2) + "\n";
  }
  return t;
}

std::string first_line(const std::string& text, const std::string& marker) {
  for (const std::string& l : lines_containing(text, marker))
    if (l.rfind(marker, 0) == 0) return l;
  return "";
}

Tally run_trial(const Cell& c, std::mt19937& rng) {
  Tally t;
  t.trials = 1;
  const int victim = std::uniform_int_distribution<int>(0, kRanks - 1)(rng);
  const int after_us = std::uniform_int_distribution<int>(20000, 300000)(rng);
  const int bytes = std::vector<int>{4096, 1 << 20, 8 << 20}[std::uniform_int_distribution<int>(0, 2)(rng)];
  const std::string mark = "FAULT_JOB=" + random_secret_hex();
  std::map<std::string, std::string> env = with(transport_env(c.transport),
      {{"STRATA_TIMEOUT", std::to_string(kTimeout)}, {"FAULT_COLL", c.coll}, {"FAULT_BYTES", std::to_string(bytes)},
       {"FAULT_VICTIM", std::to_string(victim)}, {"FAULT_SIGNAL", c.stop ? "STOP" : "KILL"},
       {"FAULT_AFTER_US", std::to_string(after_us)}, {"FAULT_JOB", mark.substr(mark.find('=') + 1)}});
  const std::string what = c.name() + " rank " + std::to_string(victim) + " after " + std::to_string(after_us / 1000) +
                           " ms, " + std::to_string(bytes) + " B";
  const double deadline = 3 * kTimeout + 20;
  std::vector<std::string> text;
  std::string dump;
  std::string secret12;
  bool hung = false;
  int launcher_status = -1;
  double survivors_end = -1;  // direct: when the last survivor ended; under strata-run: strata-run
  if (c.stopping) {
    SpawnSpec s{{STRATA_RUN_PATH, "-n", std::to_string(kRanks), "--", STRATA_FAULT_WORKER_PATH}, make_env(env), true};
    ProcResult r = run_all({s}, deadline)[0];
    hung = r.killed_by_deadline;
    launcher_status = r.exited ? r.exit_code : 128 + r.term_signal;
    text = per_rank_text(r);
    dump = tail(r.out, 4000);
  } else {
    JobSpecs js = job_specs({STRATA_FAULT_WORKER_PATH}, kRanks, env, {});
    for (SpawnSpec& s : js.ranks) s.own_group = false;  // what a rank leaves behind is counted below
    const double spawned = now_s();
    std::vector<ProcResult> rs = run_all(js.ranks, deadline);
    // The job ends with its last survivor (a stopped victim waits for its reaper).
    survivors_end = 0;
    for (int r = 0; r < kRanks; ++r)
      if (r != victim) survivors_end = std::max(survivors_end, spawned + rs[r].elapsed_s);
    for (const ProcResult& r : rs) hung |= r.killed_by_deadline;
    text = per_rank_text(rs);
    for (size_t r = 0; r < rs.size(); ++r) dump += "---- rank " + std::to_string(r) + ": " + rs[r].describe() + "\n" + tail(rs[r].err, 1500);
    // Survivors must end by their error.
    for (int r = 0; r < kRanks; ++r) {
      if (r == victim) continue;
      ++t.survivors;
      if (!(rs[r].exited && rs[r].exit_code == 3)) {
        ++t.crashes;
        t.problems.push_back(what + ": rank " + std::to_string(r) + " " + rs[r].describe());
      }
    }
  }
  const double fault_at = num(field(first_line(text[victim], "FAULT"), "at"));
  const double end = survivors_end >= 0 ? survivors_end : now_s();
  for (int r = 0; r < kRanks && secret12.empty(); ++r) secret12 = field(first_line(text[r], "READY"), "secret");
  if (hung) {
    ++t.hangs;
    t.problems.push_back(what + ": a process hung\n" + dump);
  }
  if (c.stopping) {
    t.survivors += kRanks - 1;
    // The first failure strata-run saw: the victim's SIGKILL, or a survivor that exited
    // after its error (status 3; for a stopped victim always).
    const bool expected = launcher_status == 3 || (!c.stop && launcher_status == 128 + SIGKILL);
    if (!hung && !expected) {
      ++t.crashes;
      t.problems.push_back(what + ": strata-run exited " + std::to_string(launcher_status) + "\n" + dump);
    }
  }
  if (fault_at < 0) {
    t.problems.push_back(what + ": the victim never signalled itself\n" + dump);
    ++t.crashes;
  }
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    const std::string caught = first_line(text[r], "CAUGHT");
    if (caught.empty()) {
      if (!c.stopping) t.problems.push_back(what + ": rank " + std::to_string(r) + " reported no error\n" + dump);
      continue;
    }
    ++t.reported;
    const double took = num(field(caught, "at")) - fault_at;
    t.worst_s = std::max(t.worst_s, took);
    if (field(caught, "peer") == std::to_string(victim)) ++t.named_right;
    else t.problems.push_back(what + ": rank " + std::to_string(r) + " blamed another rank: " + caught);
    if (!class_matches_kind(caught))
      t.problems.push_back(what + ": rank " + std::to_string(r) + " caught a class that disagrees with its kind: " + caught);
    const double bound = c.stop ? kTimeout + 1.0 : 1.0;
    if (took > bound) t.problems.push_back(what + ": rank " + std::to_string(r) + " reported " + std::to_string(took) + " s after the fault: " + caught);
  }
  // What is left once the job has ended (strata-run has exited, or every rank has).
  t.leftover_procs = kill_marked(mark);
  t.leftover_segs = remove_segments(secret12);
  if (t.leftover_procs || t.leftover_segs)
    t.problems.push_back(what + ": left " + std::to_string(t.leftover_procs) + " processes and " +
                         std::to_string(t.leftover_segs) + " /dev/shm segments");
  if (fault_at > 0) t.worst_end_s = end - fault_at;
  return t;
}

std::string row(const std::string& name, const Tally& t) {
  char b[400];
  std::snprintf(b, sizeof b, "%-44s %3d trials | hangs %d | crashes %d | reported %d of %d | right rank %d | "
                "slowest error %.3f s | job ended %.3f s | leftovers %d procs, %d segments",
                name.c_str(), t.trials, t.hangs, t.crashes, t.reported, t.survivors, t.named_right, t.worst_s,
                t.worst_end_s, t.leftover_procs, t.leftover_segs);
  return b;
}

void expect_clean(const Tally& t) {
  EXPECT_EQ(t.hangs, 0);
  EXPECT_EQ(t.crashes, 0);
  EXPECT_EQ(t.named_right, t.reported);
  EXPECT_EQ(t.leftover_procs, 0);
  EXPECT_EQ(t.leftover_segs, 0);
  for (const std::string& p : t.problems) ADD_FAILURE() << p;
}

Tally run_cells(const std::vector<Cell>& cells, int trials) {
  std::mt19937 rng(std::random_device{}());
  Tally all;
  std::map<std::string, Tally> by_kind;  // per signal x stopping, for the summary
  for (const Cell& c : cells) {
    Tally cell;
    for (int i = 0; i < trials; ++i) cell.add(run_trial(c, rng));
    std::cout << row(c.name(), cell) << std::endl;
    by_kind[std::string(c.stop ? "SIGSTOP" : "SIGKILL") + (c.stopping ? ", under strata-run" : ", direct")].add(cell);
    all.add(cell);
  }
  for (auto& [k, t] : by_kind) std::cout << row(k, t) << "\n";
  std::cout << row("all", all) << "\n";
  return all;
}

// A fixed handful of cells, every operation family, both signals, both stopping modes.
TEST(FaultMatrix, Subset) {
  const std::vector<Cell> cells = {
      {"all_reduce", "shm", false, false},   {"reduce_scatter", "tcp", false, true},
      {"all_to_all", "ucx_tcp", false, false}, {"send_recv", "shm", false, true},
      {"broadcast", "ucx_sm", false, false}, {"barrier", "shm", true, false},
      {"all_gather", "tcp", true, true},     {"reduce", "ucx_tcp", false, true},
  };
  expect_clean(run_cells(cells, 1));
}

// FAULT_MATRIX=full build/bin/test_fault_matrix --gtest_filter=FaultMatrix.Full
TEST(FaultMatrix, Full) {
  if (!getenv("FAULT_MATRIX") || std::string(getenv("FAULT_MATRIX")) != "full")
    GTEST_SKIP() << "the whole matrix takes minutes: FAULT_MATRIX=full runs it";
  const int trials = getenv("FAULT_TRIALS") ? std::max(1, atoi(getenv("FAULT_TRIALS"))) : 2;
  std::vector<Cell> cells;
  for (bool stop : {false, true})
    for (bool stopping : {false, true})
      for (const std::string& t : kTransports)
        for (const std::string& coll : kColls) cells.push_back({coll, t, stop, stopping});
  expect_clean(run_cells(cells, trials));
}

}  // namespace
