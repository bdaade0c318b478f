// The tests' one process runner: spawns a command with a chosen environment, captures
// its output and enforces a deadline. Used by the multi-process tests (collectives,
// failure, api, transports, training, perf) and by the launcher's tests, so it needs
// neither libstrata nor gtest.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata_test {

// Seconds on CLOCK_MONOTONIC.
double now_s();

// The environment of this process, minus STRATA_* settings that would change what a
// test exercises (STRATA_DEBUG is kept for debugging), plus `overrides`.
std::vector<std::string> make_env(const std::map<std::string, std::string>& overrides);

struct ProcResult {
  int status = -1;          // raw wait status
  bool exited = false;      // WIFEXITED
  int exit_code = -1;       // WEXITSTATUS when exited, else -1
  int term_signal = 0;      // WTERMSIG when signaled
  bool killed_by_deadline = false;
  double elapsed_s = 0;     // from spawn to reap
  std::string out;          // stdout (merged with stderr when asked)
  std::string err;          // stderr
  std::string describe() const;
};

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is a path (no PATH search)
  std::vector<std::string> env;   // the whole environment, "NAME=value"
  bool merge_stderr = false;      // send stderr to the stdout pipe
  // The process leads its own process group, and whatever is left in that group is
  // killed when it exits or at the deadline. Off for tests that check what a process
  // leaves behind itself (the launcher's).
  bool own_group = true;
  // stdin is a pipe held open until the process is collected, so that a child that
  // wrongly reads it blocks instead of seeing end-of-file; otherwise /dev/null.
  bool stdin_pipe = false;
};

namespace detail {
struct Child;
}

// A running process. Output is collected by finish() (or run_all) until the process has
// exited and closed its output, or until `deadline_s` from the spawn has passed; a process
// still running then gets SIGKILL.
class Process {
 public:
  explicit Process(const SpawnSpec& spec);
  ~Process();  // kills and reaps a process that was not collected
  Process(Process&&) noexcept;
  Process& operator=(Process&&) = delete;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const;
  // Reads the process's output until `needle` appears in it (stdout or stderr) or
  // `timeout_s` passes; false then, or when the process has exited without writing it.
  // What was read is kept for finish().
  bool wait_for_output(const std::string& needle, double timeout_s);
  ProcResult finish(double deadline_s);

 private:
  friend std::vector<ProcResult> run_all(const std::vector<SpawnSpec>&, double);
  std::unique_ptr<detail::Child> child_;
};

// Runs several processes at once until all are collected; one result each.
std::vector<ProcResult> run_all(const std::vector<SpawnSpec>& specs, double deadline_s);

// One command in its own group, stderr merged into stdout, environment make_env(env_overrides).
ProcResult run_one(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides,
                   double deadline_s);

// The last `max_chars` characters of `s` (for failure messages).
std::string tail(const std::string& s, size_t max_chars = 6000);

// The first interpreter that can import torch: $STRATA_PYTHON, python3 on PATH, or the
// system's (a pyenv shim on PATH may hide Debian's python3-torch); "" when none can.
std::string find_torch_python();

// The program a test runs: the file named like `built_path` beside this test's own
// executable where there is one (a bundle carried to another machine, tools/gpu-pack),
// else `built_path` (the build tree, where the two are the same file).
std::string sibling_program(const std::string& built_path);

// The device backend the device tests run their ranks on: $STRATA_DEVICE of the test
// process (tools/gpu-check sets cuda), else the emulated backend. (make_env drops STRATA_*
// from what children inherit, so a test passes this on explicitly.)
std::string device_under_test();

// The lines of `s` that contain `needle`.
std::vector<std::string> lines_containing(const std::string& s, const std::string& needle);

}  // namespace strata_test
