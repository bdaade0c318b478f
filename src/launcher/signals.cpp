#include "signals.hpp"
#include "throw_errno.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

namespace strata::launcher {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Shared with the handler, so lock-free atomics (async-signal-safe) and plain ints
// written before the handlers are installed.
std::atomic<int> g_last_stop_signal{0};
std::atomic<int> g_stop_count{0};
static_assert(std::atomic<int>::is_always_lock_free);
int g_wakeup_pipe[2] = {-1, -1};

// What strata-run inherited, for the children.
sigset_t g_original_mask;
struct sigaction g_original_sigpipe;
bool g_caught[NSIG] = {};

void on_signal(int sig) {
  int saved_errno = errno;
  if (sig != SIGCHLD) {
    // The signal is stored before the count goes up, so whoever sees the count also
    // sees a signal number.
    g_last_stop_signal.store(sig);
    g_stop_count.fetch_add(1);
  }
  // The pipe is non-blocking: when it is full the loop is going to wake up anyway.
  char byte = 0;
  [[maybe_unused]] ssize_t n = ::write(g_wakeup_pipe[1], &byte, 1);
  errno = saved_errno;
}

void catch_signal(int sig) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
  if (::sigaction(sig, &sa, nullptr) != 0) throw_errno("cannot install a signal handler");
  g_caught[sig] = true;
}

}  // namespace

void install_signal_handlers() {
  if (::pipe2(g_wakeup_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("cannot create a pipe");
  ::sigprocmask(SIG_SETMASK, nullptr, &g_original_mask);

  catch_signal(SIGCHLD);
  for (int sig : kStopSignals) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN) catch_signal(sig);
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &g_original_sigpipe);

  // Our signals must get through even if whoever started us blocked them.
  sigset_t ours;
  sigemptyset(&ours);
  sigaddset(&ours, SIGCHLD);
  for (int sig : kStopSignals) sigaddset(&ours, sig);
  ::sigprocmask(SIG_UNBLOCK, &ours, nullptr);
}

int signal_wakeup_fd() { return g_wakeup_pipe[0]; }

PendingSignals take_pending_signals() {
  // Drain first, then read the flags: a signal landing in between leaves a byte in the
  // pipe, so the next poll() wakes up again instead of the signal being missed.
  char buf[256];
  while (::read(g_wakeup_pipe[0], buf, sizeof buf) > 0) {
  }
  PendingSignals p;
  p.stop_count = g_stop_count.exchange(0);
  if (p.stop_count > 0) p.stop_signal = g_last_stop_signal.load();
  return p;
}

SignalBlock::SignalBlock() {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &saved_);
}

SignalBlock::~SignalBlock() { ::sigprocmask(SIG_SETMASK, &saved_, nullptr); }

void restore_signals_in_child() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (g_caught[sig]) ::sigaction(sig, &dfl, nullptr);
  ::sigaction(SIGPIPE, &g_original_sigpipe, nullptr);
  ::sigprocmask(SIG_SETMASK, &g_original_mask, nullptr);
}

}  // namespace strata::launcher
