// The failure protocol over a communicator's control sockets (one per pair of ranks): it
// turns every way a peer can fail into an error naming a rank — a closed connection, an
// abort or refusal notice from another rank, a goodbye while data is still expected, no
// progress within STRATA_TIMEOUT (then a liveness probe decides whom to blame) — and tells
// the peers when this rank fails, refuses a call, leaves or aborts. The engine owns one and
// calls it while a round's links stall (docs/architecture.md, "Engine").
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "core/notice.hpp"
#include "ground/call.hpp"
#include "ground/settings.hpp"
#include "ground/socket.hpp"
#include "strata/error.hpp"
#include "transports/transport.hpp"

namespace strata {

class ControlChannel {
 public:
  using Clock = std::chrono::steady_clock;

  // What the channel tracks over the stalls of one wait for a round's links; zero at the
  // start of the wait.
  struct Watch {
    Clock::time_point last_check;  // the control sockets were last read (zero: not in this wait)
    Clock::time_point probe_sent;  // this stall's liveness probe went out (zero: none yet)
    // The links stall (nothing moved for a while) at `now`.
    void stall_begins(Clock::time_point now) {
      probe_sent = Clock::time_point{};
      if (last_check == Clock::time_point{}) last_check = now;
    }
  };

  // `control`: by peer rank, invalid for this rank; made non-blocking here.
  ControlChannel(int rank, int nranks, std::vector<net::Fd> control, const Config& cfg);

  // The first error of the engine, if it failed: every later call throws it.
  const std::exception_ptr& failed() const { return failed_; }
  // While the links in `waiting` stall (nothing moved since `last_progress`): throws when
  // the communicator was aborted or revoked, reads the control sockets every 2 ms, fails a
  // receive from a rank that left, and past STRATA_TIMEOUT probes the peers and names the
  // rank that stopped.
  void on_stall(Watch& w, Clock::time_point now, Clock::time_point last_progress, const std::vector<Link*>& waiting);
  // `peer` said goodbye (destroyed its communicator).
  bool left(int peer) const { return peer_left_[static_cast<size_t>(peer)]; }
  // The error for a transfer a departed peer left unfinished.
  PeerError departed(int peer) const;
  // A running operation failed with `e`: records it (the engine stays failed), names the
  // culprit (an abort notice already waiting names it better than the link's peer), tells
  // every peer, and rethrows the error that names it.
  [[noreturn]] void fail_call(std::exception_ptr e);

  // Tells every peer this rank is leaving on purpose (destroy), so they do not report it.
  void say_goodbye();
  // Callable from any thread: running and later operations fail, connections are shut
  // down so peers see this rank leave.
  void abort();
  // Comm::shrink, from any thread: an operation running now fails at its next stall, and
  // nothing is sent to the peers (the shrink's own notices tell them).
  void revoke() { revoked_.store(true); }
  // After abort() or revoke(): the error an operation still waiting fails with; else null.
  std::exception_ptr interrupted() const;
  // Once nothing runs any more: every later call throws `why`.
  void fail_later_calls(std::exception_ptr why) {
    if (!failed_) failed_ = why;
  }
  // This rank refused a call's arguments on its own (`what`: its message): every peer is
  // told, so the call fails on every rank; later calls here throw.
  void refuse(Fault fault, Collective coll, const std::string& what);
  // The control socket to `peer` (-1 for this rank), for the shrink's agreement.
  int control_fd(int peer) const {
    return control_[static_cast<size_t>(peer)].valid() ? control_[static_cast<size_t>(peer)].get() : -1;
  }
  // The rank whose failure failed this engine (-1: none known), and whether it was found
  // stopped (it did not answer the liveness probe).
  int culprit() const { return culprit_; }
  bool culprit_stopped() const { return culprit_stopped_; }

 private:
  // Reads every notice waiting: answers probes, records answers and goodbyes; throws on a
  // dead, aborting or refusing peer.
  void check_control();
  // After a link to `culprit` failed: an abort notice already waiting names the real
  // culprit better than the link's peer, which may only have exited because of it; a
  // goodbye from the culprit says it destroyed the communicator.
  void prefer_abort_notice(int culprit);
  [[noreturn]] void throw_notice_error(const Notice& n, int from);  // for an 'A' or 'R' notice; sets relay_
  PeerError shrinking_error(const Notice& n, int from);  // a peer's shrink began ('J'); sets relay_
  // The liveness probe on a timeout: every live peer is asked, and answers from check_control.
  void send_probe();
  std::vector<int> silent_peers() const;  // live peers that have not answered the probe
  bool all_answered() const;
  // Names the rank that stopped: the one waited on if it did not answer, else another
  // silent one; when all answered, the rank waited on, saying that it is unsure.
  [[noreturn]] void fail_stuck(Clock::duration probed, const std::vector<Link*>& waiting);
  void fail(std::exception_ptr e, int culprit);
  void tell_everyone(const Notice& n);

  int rank_, nranks_;
  std::vector<net::Fd> control_;  // by peer rank
  std::chrono::duration<double> timeout_;
  std::string timeout_text_;       // STRATA_TIMEOUT and where it came from, for messages
  std::vector<bool> peer_left_;  // said goodbye
  std::vector<bool> answered_;   // answered this stall's liveness probe
  Notice relay_{};               // what fail() tells the peers; kind 0: an abort naming the culprit
  bool from_notice_ = false;     // the failure came from a peer's notice
  std::exception_ptr failed_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> revoked_{false};
  int culprit_ = -1;
  bool culprit_stopped_ = false;
};

}  // namespace strata
