// The engine executes plans over a communicator's links, one operation at a time. Its
// connector (core/connector.hpp) makes the links a plan needs the first time it needs them;
// its control channel (core/control_channel.hpp) turns every way a peer can fail into an
// error and tells the peers when this rank fails.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/connector.hpp"
#include "core/control_channel.hpp"
#include "core/executor.hpp"
#include "core/store_chooser.hpp"
#include "core/wait_policy.hpp"
#include "ground/call.hpp"
#include "ground/plan.hpp"
#include "ground/reduce.hpp"
#include "ground/settings.hpp"
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

  // `oversubscribed`: a machine of the job runs more ranks than it gives them CPUs. The
  // rest is the connector's (core/connector.hpp); `table` outlives the engine.
  Engine(int rank, const std::vector<bootstrap::RankInfo>& table, net::Incoming in, const bootstrap::Secret& secret,
         uint64_t comm_tag, const Config& cfg, bool oversubscribed = false);
  ~Engine();

  // Runs one plan to completion over the call's buffers (the plan's input and output) and
  // `scratch`, connecting the peers it needs first. After any failure the engine stays
  // failed: this and every later call throws the first error (the links' byte streams are
  // no longer in step). `slot`: what the engine keeps for this plan between calls (its
  // store choice, for large calls).
  void execute(const Plan& plan, const Call& call, void* scratch, std::unique_ptr<PlanSlot>& slot);
  // Makes the links of `kind` to every rank in `peers` now, waiting as a call does (the
  // failure protocol names a peer that is dead or stopped); on failure the engine fails.
  // Device links are made only here, on the caller's thread (Connector::allow_device).
  void connect(const std::vector<int>& peers, MemoryKind kind);
  // Only the control connections (the failure overlay at creation, the shrink).
  void connect_control(const std::vector<int>& peers);
  // Whether the links of `kind` to all of `peers` are made (no waiting).
  bool connected(const std::vector<int>& peers, MemoryKind kind) const;
  // The same, throwing the failure of a pair that cannot be connected.
  bool connected_or_raise(const std::vector<int>& peers, MemoryKind kind) const;
  // Makes this memory kind's executor now, once: called on the caller's thread before the
  // first call of that kind is issued.
  void prepare(MemoryKind kind);
  // The failure protocol over the control sockets: goodbye, abort, refusals, shrink.
  ControlChannel& control() { return control_; }
  const ControlChannel& control() const { return control_; }
  Connector& connector() { return connector_; }
  const Connector& connector() const { return connector_; }
  // The link of `kind` to `peer` forwards reductions (LinkCaps::forwards_reductions),
  // connecting it first.
  bool forwards(int peer, MemoryKind kind);
  // The transport to `peer` for `kind` ("shm", "tcp", ...), "self", or "none" (not connected).
  const char* link_name(int peer, MemoryKind kind = MemoryKind::host) const {
    const auto& l = links_of(kind)[static_cast<size_t>(peer)];
    return l ? l->name() : peer == rank_ ? "self" : "none";
  }

 private:
  // What the rounds of one call share.
  struct CallRun {
    const Call& call;
    const Links& links;  // of the call's memory kind
    Executor& exec;      // of the call's memory kind
    Buffers bufs;
    PlanSlot& slot;          // the engine's, beside the cached plan
    bool unsettled = false;  // local steps wrote what the executor has not settled yet
  };
  // Makes what the local steps wrote visible, polling the executor in wait_until.
  void settle(CallRun& run);
  void run_round(const Plan& plan, size_t round, CallRun& run);
  // A step of `round` addresses a peer without a link: connects every peer the rest of the
  // plan addresses (in one wait, so a plan of many peers connects them side by side).
  void connect_rest(const Plan& plan, size_t round, MemoryKind kind);
  // Made on the first call of its kind.
  Executor& executor(MemoryKind kind) {
    const auto& e = executors_[static_cast<size_t>(kind)];
    return e ? *e : first_executor(kind);
  }
  Executor& first_executor(MemoryKind kind);
  // A plan step addresses a peer to which no link carries the call's memory kind.
  [[noreturn]] void throw_no_link(int peer, MemoryKind kind) const;
  void wait_links();
  // Waits, as wait_links does, until `done()`; the connector and the round's links move
  // meanwhile, and `waited()` names the ranks waited on when it stalls.
  template <class Done, class Waited>
  void wait_until(const Done& done, const Waited& waited);
  Links& links_of(MemoryKind k) { return connector_.links(k); }
  const Links& links_of(MemoryKind k) const { return connector_.links(k); }

  int rank_, nranks_;
  std::array<bool, kNumMemoryKinds> prepared_{};
  ControlChannel control_;
  Connector connector_;                                               // after control_, which it sends through
  std::array<std::unique_ptr<Executor>, kNumMemoryKinds> executors_;  // by memory kind
  std::vector<Link*> active_;
  std::vector<int> waited_;                               // scratch for a stall: the ranks waited on
  WaitPolicy waits_;                                      // how long wait_links spins before yielding
  double timeout_s_;                                      // STRATA_TIMEOUT
  std::array<bool, kNumMemoryKinds> streaming_stores_{};  // by kind: what its links were last told
};

}  // namespace strata
