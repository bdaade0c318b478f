// Running a job: start the ranks, forward their output, watch them exit, and stop them
// all when one fails or strata-run is told to stop.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "job_env.hpp"
#include "options.hpp"
#include "output.hpp"

namespace strata::launcher {

class EmulatedCluster;

class Job {
 public:
  // Signal handlers must already be installed (install_signal_handlers). With a cluster
  // (--hosts), each rank starts in its host's network namespace with its host's local
  // rank and size; the cluster must outlive the job.
  Job(const Options& options, JobIdentity identity, const char* const* base_environment,
      const EmulatedCluster* cluster = nullptr);
  // Safety net for an exception escaping run(): no rank outlives strata-run.
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Returns strata-run's exit status (see the usage text for the convention).
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  struct Stream {
    int fd = -1;  // -1 once closed
    LineForwarder lines;
  };
  struct Rank {
    int index;
    pid_t pid = -1;  // -1: never started; also its process group id
    bool running = false;
    Stream out, err;
  };

  void start_ranks();
  void handle_signals();
  void reap_children();
  void on_rank_exit(Rank& rank, int wait_status);
  void begin_stop(int exit_status);
  void kill_now(const std::string& why);
  void signal_all_groups(int sig);
  void read_stream(Stream& stream);
  void close_stream(Stream& stream);
  void after_last_exit();
  int running_count() const;
  bool streams_open() const;
  int poll_timeout_ms() const;

  Options options_;
  JobIdentity identity_;
  const char* const* base_environment_;
  const EmulatedCluster* cluster_;
  OutputSink stdout_sink_;
  OutputSink stderr_sink_;
  std::vector<Rank> ranks_;

  bool stopping_ = false;      // SIGTERM has gone out; no more failures are reported
  bool killed_ = false;        // SIGKILL has gone out
  bool cleaned_up_ = false;    // all ranks exited and leftovers were killed
  int exit_status_ = 0;        // decided by the first cause of stopping
  std::optional<Clock::time_point> kill_deadline_;   // SIGTERM + grace
  std::optional<Clock::time_point> drain_deadline_;  // after the last exit
};

}  // namespace strata::launcher
