// The engine executes plans over a communicator's links, one operation at a time, and
// turns every way a peer can fail into an error: a closed connection, an abort notice
// from another rank, or no progress within STRATA_TIMEOUT.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ground/settings.hpp"
#include "core/mesh.hpp"
#include "core/notice.hpp"
#include "ground/call.hpp"
#include "ground/plan.hpp"
#include "ground/reduce.hpp"
#include "core/store_chooser.hpp"
#include "core/wait_policy.hpp"
#include "strata/types.hpp"

namespace strata {


class Engine {
 public:
  // What a plan's Buf::input, output and scratch refer to in one call.
  struct Buffers {
    const void* input;
    void* output;
    void* scratch;
  };

  // `oversubscribed`: a machine of the job runs more ranks than it gives them CPUs.
  Engine(int rank, int nranks, Mesh mesh, const Config& cfg, bool oversubscribed = false);
  ~Engine();

  // Runs one plan to completion over the call's buffers (the plan's input and output) and
  // `scratch`. After any failure the engine stays failed: this and every later call throws
  // the first error (the links' byte streams are no longer in step). `slot`: what the
  // engine keeps for this plan between calls (its store choice, for large calls).
  void execute(const Plan& plan, const Call& call, void* scratch, std::unique_ptr<PlanSlot>& slot);
  // Tells every peer this rank is leaving on purpose (destroy), so they do not report it.
  void say_goodbye();
  // Callable from any thread: running and later operations fail, connections are shut
  // down so peers see this rank leave.
  void abort();
  // Comm::shrink, from any thread: an operation running now fails at its next stall, and
  // nothing is sent to the peers (the shrink's own notices tell them).
  void revoke() { revoked_.store(true); }
  // Once nothing runs any more: every later call throws `why`.
  void fail_later_calls(std::exception_ptr why) {
    if (!failed_) failed_ = why;
  }
  // The control socket to `peer` (-1 for this rank), for the shrink's agreement.
  int control_fd(int peer) const { return mesh_.control[static_cast<size_t>(peer)].valid() ? mesh_.control[static_cast<size_t>(peer)].get() : -1; }
  // The rank whose failure failed this engine (-1: none known), and whether it was found
  // stopped (it did not answer the liveness probe).
  int culprit() const { return culprit_; }
  bool culprit_stopped() const { return culprit_stopped_; }
  // This rank refused a call's arguments on its own (`what`: its message): every peer is
  // told, so the call fails on every rank; later calls here throw.
  void refuse(Fault fault, Collective coll, const std::string& what);
  // Every link to a peer forwards reductions (Link::forwards).
  bool links_forward() const { return links_forward_; }
  // The transport to `peer` ("shm", "tcp", ...), or "self".
  const char* link_name(int peer) const { return mesh_.links[static_cast<size_t>(peer)] ? mesh_.links[static_cast<size_t>(peer)]->name() : "self"; }

 private:
  void run_round(const Plan& plan, size_t round, const Buffers& bufs, DataType type, ReduceOp op);
  void wait_links();
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
  [[noreturn]] void fail_stuck(std::chrono::steady_clock::duration probed);
  PeerError departed(int peer) const;  // the error for a transfer a departed peer left unfinished
  void fail(std::exception_ptr e, int culprit);
  void tell_everyone(const Notice& n);

  int rank_, nranks_;
  Mesh mesh_;
  Config cfg_;
  std::vector<Link*> active_;
  std::vector<bool> peer_left_;  // said goodbye
  std::vector<bool> answered_;   // answered this stall's liveness probe
  Notice relay_{};               // what fail() tells the peers; kind 0: an abort naming the culprit
  bool from_notice_ = false;     // the failure came from a peer's notice
  std::exception_ptr failed_;
  WaitPolicy waits_;  // how long wait_links spins before yielding
  std::atomic<bool> aborted_{false};
  std::atomic<bool> revoked_{false};
  int culprit_ = -1;
  bool culprit_stopped_ = false;
  bool streaming_stores_ = false;  // what the links were last told
  bool links_forward_ = true;      // set once: the links do not change
};

}  // namespace strata
