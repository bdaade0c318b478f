// Test harness: runs strata-run as a child process (through the tests' process runner)
// and looks at what it and its ranks left behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/process.hpp"

namespace launcher_test {

using strata_test::Process;
using strata_test::ProcResult;

// Starts strata-run with `args`. Its environment is this process's without STRATA_*
// settings (make_env), plus `extra_env` ("NAME=value"), and so the ranks'. It is not put in a process group of its own, so that what it leaves
// behind is seen, and its stdin is a pipe kept open until finish(): a rank that wrongly
// inherited it would block reading instead of seeing end-of-file.
Process start_launcher(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {});

// Seconds a launch may take before the harness kills strata-run.
inline constexpr double kLaunchDeadline = 20;

// Runs strata-run to the end (killed after kLaunchDeadline).
ProcResult run_launcher(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {});

// A fresh directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string env() const { return "TESTDIR=" + path_.string(); }

 private:
  std::filesystem::path path_;
};

// Shell functions for a rank: `record NAME PID` atomically writes PID to $TESTDIR/NAME.$RANK;
// `await_ranks K` waits until K ranks have recorded a "rank" pid.
extern const char* const kRecordFn;

// The pids recorded by kRecordFn in `dir`.
std::set<pid_t> recorded_pids(const std::filesystem::path& dir);
// Waits until `count` pids have been recorded; false on timeout.
bool wait_for_recorded(const std::filesystem::path& dir, size_t count,
                       std::chrono::milliseconds timeout);

// Alive and not a zombie (orphans may be reparented to an init that does not reap).
bool process_alive(pid_t pid);
// Waits up to `timeout` for all to be gone; returns those still alive.
std::set<pid_t> survivors(const std::set<pid_t>& pids,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

std::vector<std::string> split_lines(const std::string& text);
::testing::AssertionResult contains(const std::string& haystack, const std::string& needle);

}  // namespace launcher_test
