#include "deadline.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

namespace replay {

namespace {

using Clock = std::chrono::steady_clock;

struct Watch {
  std::mutex m;
  std::condition_variable cv;
  std::string variant;
  int rank = 0;
  double deadline_s = 30;
  std::string current = "start";
  Clock::time_point since = Clock::now();
  std::deque<std::string> history;  // the steps before the current one, newest last
  bool stop = false;
  std::thread thread;
};

Watch& watch() {
  static Watch w;
  return w;
}

void run() {
  Watch& w = watch();
  std::unique_lock lk(w.m);
  while (!w.stop) {
    w.cv.wait_for(lk, std::chrono::milliseconds(100));
    if (w.stop) return;
    const double waited = std::chrono::duration<double>(Clock::now() - w.since).count();
    if (waited < w.deadline_s) continue;
    std::fprintf(stderr, "replay %s rank %d: HUNG: step '%s' has not ended after %.0f s (its deadline); steps before it:\n",
                 w.variant.c_str(), w.rank, w.current.c_str(), waited);
    for (const std::string& s : w.history) std::fprintf(stderr, "  %s\n", s.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(124);
  }
}

}  // namespace

void start_deadlines(const std::string& variant, int rank, double step_deadline_s) {
  Watch& w = watch();
  {
    std::lock_guard lk(w.m);
    w.variant = variant;
    w.rank = rank;
    w.deadline_s = step_deadline_s;
    w.since = Clock::now();
  }
  w.thread = std::thread(run);
}

void step(const std::string& what) {
  Watch& w = watch();
  std::lock_guard lk(w.m);
  w.history.push_back(w.current);
  if (w.history.size() > 12) w.history.pop_front();
  w.current = what;
  w.since = Clock::now();
  if (std::getenv("REPLAY_TRACE")) std::fprintf(stderr, "replay %s rank %d: %s\n", w.variant.c_str(), w.rank, what.c_str());
}

void stop_deadlines() {
  Watch& w = watch();
  {
    std::lock_guard lk(w.m);
    w.stop = true;
  }
  w.cv.notify_all();
  if (w.thread.joinable()) w.thread.join();
}

}  // namespace replay
