// How long a rank spins on its links before it yields the CPU, learnt from how its stalls
// end.
//
// Spinning is the fastest wait while the peer runs on another CPU: its data is seen the
// moment it lands. It is pure loss while the peer waits for *this* CPU: the peer cannot
// send until this rank gives the CPU up. That happens with more ranks than CPUs, and also
// with ranks = CPUs on a loaded machine: the scheduler places a rank woken by a socket
// on its waker's CPU when its own is busy, so two ranks fresh from bootstrap often share
// one CPU, and spinning and yielding never give it a reason to move them. On a loaded
// machine that was most short runs, and spinning 64 empty polls before each yield, on each
// side, cost a small call more than yielding at the first empty poll did
// (docs/benchmarks.md, "Measured choices").
//
// What tells the two apart is the yield: one that switches to another thread takes
// microseconds, several times a yield with nobody else to run (kSwitchedYield sits
// between the two; docs/benchmarks.md, "Measured choices"). A stall that ends after such
// a yield means the CPU is shared; two in a row make the rank yield at its first empty
// poll. A stall whose yields switched nowhere means nobody else wants this CPU, so
// spinning costs nobody anything: the rank spins again. One stall in kExploreEvery spins
// the full budget anyway, so a peer that has moved to another CPU is noticed even while
// every yield switches (to some other job's thread).
#pragma once

#include <chrono>

namespace strata {

class WaitPolicy {
 public:
  static constexpr unsigned kSpinPolls = 64;  // empty polls before the first yield, spinning
  static constexpr unsigned kSharedAfter = 2;  // stalls in a row ended by a switching yield
  static constexpr unsigned kExploreEvery = 16;
  // A yield taking this long ran another thread.
  static constexpr std::chrono::nanoseconds kSwitchedYield{1500};

  // Oversubscribed: more ranks than CPUs on a machine of the job, so start by yielding.
  explicit WaitPolicy(bool oversubscribed) : yielding_(oversubscribed) {}

  // Empty polls before the next stall's first yield.
  unsigned spin_polls() const { return yielding_ && stalls_ % kExploreEvery != 0 ? 1 : kSpinPolls; }

  // A stall ended: progress came after `yields` yields, `switched` of which ran another
  // thread (took kSwitchedYield or more).
  void stall_ended(unsigned yields, unsigned switched) {
    ++stalls_;
    if (yields == 0) {  // spinning was enough
      shared_in_a_row_ = 0;
      yielding_ = false;
    } else if (switched == 0) {  // nobody else wanted the CPU
      shared_in_a_row_ = 0;
      yielding_ = false;
    } else if (++shared_in_a_row_ >= kSharedAfter) {
      yielding_ = true;
    }
  }

  bool yielding() const { return yielding_; }

 private:
  bool yielding_;
  unsigned shared_in_a_row_ = 0;
  unsigned stalls_ = 0;
};

}  // namespace strata
