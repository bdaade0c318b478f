// What the fault-injecting test workers (strata-failure-worker, strata-shrink-worker,
// strata-fault-worker) share: the clock their lines carry (CLOCK_MONOTONIC, one clock for
// every process of the machine, so the harness can subtract a victim's time from a
// survivor's), a rank that signals itself, and what a survivor checks after its error.
// Every line the harness reads starts with a capitalised marker on stderr.
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "error_fields.hpp"

namespace strata_test {

inline double mono_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

// "MARKER at=<now> after=<seconds> class=... kind=... peer=... msg=..." (msg runs to the end).
inline void report(const char* marker, const strata::Error& e, double seconds = 0) {
  fprintf(stderr, "%s at=%.6f after=%.3f%s\n", marker, mono_s(), seconds, error_fields(e).c_str());
  fflush(stderr);
}

// The job's communicator; on failure "INIT-FAILED ..." and exit status 10 (what the tests
// look for when a job could not start).
inline strata::Comm init_or_exit() {
  try {
    return strata::Comm::init_from_env();
  } catch (const strata::Error& e) {
    report("INIT-FAILED", e);
    exit(10);
  }
}

// Sends `sig` to this process `after_us` from now, from another thread, saying
// "MARKER at=<when>" first.
inline void signal_self_after(long after_us, int sig, const char* marker) {
  std::thread([after_us, sig, marker] {
    std::this_thread::sleep_for(std::chrono::microseconds(after_us));
    fprintf(stderr, "%s at=%.6f\n", marker, mono_s());
    fflush(stderr);
    kill(getpid(), sig);
  }).detach();
}

// A stopped process would outlive its test: a child kills it `seconds` from now, and ends
// sooner when the process is gone otherwise (so it is never left behind itself).
inline void reap_later(double seconds) {
  const pid_t self = getpid();
  if (fork() != 0) return;
  const double until = mono_s() + seconds;
  while (mono_s() < until) {
    if (getppid() != self) _exit(0);  // it died: reparented
    usleep(20000);
  }
  kill(self, SIGKILL);
  _exit(0);
}

// After a failure: later calls must throw (not hang) and destroy() must return. Exits 3.
[[noreturn]] inline void after_error(strata::Comm& comm) {
  std::vector<float> x(1024, 1.0f), y(1024);
  double t = mono_s();
  try {
    comm.all_reduce(x.data(), y.data(), x.size(), strata::DataType::float32, strata::ReduceOp::sum);
    fprintf(stderr, "SECOND-CALL-NO-THROW after=%.3f\n", mono_s() - t);
  } catch (const strata::Error& e) {
    report("SECOND-CALL-THREW", e, mono_s() - t);
  }
  t = mono_s();
  try {
    comm.barrier();
    fprintf(stderr, "THIRD-CALL-NO-THROW after=%.3f\n", mono_s() - t);
  } catch (const strata::Error& e) {
    report("THIRD-CALL-THREW", e, mono_s() - t);
  }
  t = mono_s();
  try {
    comm.destroy();
    fprintf(stderr, "DESTROY-RETURNED after=%.3f\n", mono_s() - t);
  } catch (const strata::Error& e) {
    report("DESTROY-THREW", e, mono_s() - t);
  }
  fflush(stderr);
  exit(3);
}

}  // namespace strata_test
