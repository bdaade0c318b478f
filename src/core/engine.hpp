// The engine executes plans over a communicator's links, one operation at a time. Its
// control channel (core/control_channel.hpp) turns every way a peer can fail into an error
// and tells the peers when this rank fails.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/control_channel.hpp"
#include "core/executor.hpp"
#include "core/mesh.hpp"
#include "ground/settings.hpp"
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
  // Makes this memory kind's executor and its links' device resources now (Link::prepare),
  // once: called on the caller's thread before the first call of that kind is issued.
  void prepare(MemoryKind kind);
  // The failure protocol over the control sockets: goodbye, abort, refusals, shrink.
  ControlChannel& control() { return control_; }
  const ControlChannel& control() const { return control_; }
  // Every peer has a link for `kind` that forwards reductions (LinkCaps::forwards_reductions).
  bool links_forward(MemoryKind kind) const { return links_forward_[static_cast<size_t>(kind)]; }
  // The transport to `peer` for `kind` ("shm", "tcp", ...), "self", or "none".
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
    bool unsettled = false;  // local steps wrote what the executor has not settled yet
  };
  void run_round(const Plan& plan, size_t round, CallRun& run);
  // Made on the first call of its kind.
  Executor& executor(MemoryKind kind) {
    const auto& e = executors_[static_cast<size_t>(kind)];
    return e ? *e : first_executor(kind);
  }
  Executor& first_executor(MemoryKind kind);
  // A plan step addresses a peer to which no link carries the call's memory kind.
  [[noreturn]] void throw_no_link(int peer, MemoryKind kind) const;
  void wait_links();
  Links& links_of(MemoryKind k) { return links_[static_cast<size_t>(k)]; }
  const Links& links_of(MemoryKind k) const { return links_[static_cast<size_t>(k)]; }

  int rank_, nranks_;
  std::array<bool, kNumMemoryKinds> prepared_{};
  std::array<Links, kNumMemoryKinds> links_;  // by memory kind, then peer (Mesh::links)
  ControlChannel control_;
  std::array<std::unique_ptr<Executor>, kNumMemoryKinds> executors_;  // by memory kind
  std::vector<Link*> active_;
  WaitPolicy waits_;  // how long wait_links spins before yielding
  std::array<bool, kNumMemoryKinds> streaming_stores_{};  // by kind: what its links were last told
  std::array<bool, kNumMemoryKinds> links_forward_{};     // set once: the links do not change
};

}  // namespace strata
