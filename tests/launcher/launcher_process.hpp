// Test harness: runs strata-run as a child process and collects what it did.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace launcher_test {

struct LaunchResult {
  int wait_status = 0;
  bool timed_out = false;  // strata-run had to be killed by the harness
  std::string out, err;
  double seconds = 0;  // from start to exit
  // The exit code, or -1 when strata-run itself died of a signal.
  int exit_code() const;
};

// A running strata-run. Its stdin is a pipe the harness keeps open until finish(), so a
// rank that wrongly inherited it would block reading instead of seeing end-of-file.
class Launch {
 public:
  // `extra_env` ("NAME=value") is added to strata-run's environment (and so the ranks').
  explicit Launch(const std::vector<std::string>& args,
                  const std::vector<std::string>& extra_env = {});
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  pid_t pid() const { return pid_; }
  // Collects output until strata-run exits; kills it after `timeout`.
  LaunchResult finish(std::chrono::seconds timeout = std::chrono::seconds(20));

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1, stdout_fd_ = -1, stderr_fd_ = -1;
  std::chrono::steady_clock::time_point started_;
  bool finished_ = false;
};

LaunchResult run_launcher(const std::vector<std::string>& args,
                          const std::vector<std::string>& extra_env = {});

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
