// strata-run's signal handling. Handlers only record the signal and write a byte to a
// pipe (the self-pipe trick), so the poll() loop wakes up and does the real work outside
// signal context.
#pragma once

#include <signal.h>

namespace strata::launcher {

// Catches SIGINT, SIGTERM, SIGHUP (the "stop" signals) and SIGCHLD, and ignores SIGPIPE so
// that a closed stdout does not kill strata-run before it has stopped the ranks. A stop
// signal that was ignored when strata-run started (nohup, background jobs of a script)
// stays ignored, as a shell would do. Call once, before starting any rank.
void install_signal_handlers();

// Readable whenever a signal has arrived since the last take_pending_signals().
int signal_wakeup_fd();

struct PendingSignals {
  int stop_signal = 0;  // the latest stop signal, set when stop_count > 0
  int stop_count = 0;   // how many stop signals arrived since the last call
};

// Empties the wakeup pipe and returns what arrived. SIGCHLD needs no entry: the caller
// reaps children whenever it wakes up.
PendingSignals take_pending_signals();

// Blocks every signal for its lifetime. Held around fork() so that no handler of ours
// runs in the child before the child has reset them.
class SignalBlock {
 public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t saved_;
};

// In a freshly forked child, before exec: gives back the signal dispositions and the
// signal mask that strata-run started with. Async-signal-safe.
void restore_signals_in_child();

}  // namespace strata::launcher
