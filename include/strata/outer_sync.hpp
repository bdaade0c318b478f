// DiLoCo-style outer synchronisation across islands (arXiv 2311.08105, and the streaming
// variant of arXiv 2501.18512).
//
//   strata::OuterSyncConfig cfg;             // lr 0.7, momentum 0.9, Nesterov, fp32
//   cfg.every = 100;                         // H inner steps between syncs
//   strata::OuterSync outer(comm, params, n, cfg);
//   for (...) { inner_step(params); outer.step(); }
//   outer.finish();
//
// An island is a group of ranks that hold the same replica (data parallel or ZeRO inside
// it). The object keeps the snapshot θ_old of the parameter buffer. A sync forms the
// pseudo-gradient Δ = θ_old − θ, averages it over the islands only, applies the outer
// optimizer to θ_old (SGD with momentum, PyTorch's torch.optim.SGD semantics, Nesterov by
// default), and writes the result into θ, where it is also the new snapshot.
//
// The exchange follows the hierarchy: with g ranks per island, rank i of each island
// carries only the i-th 1/g share of Δ across islands (the g shares travel in parallel
// and no rank sends the whole model). Inside the share, each of the K islands owns 1/K:
// the owner receives every island's encoded piece, decodes and sums them in fp32 in
// island order, divides by K and encodes the average once; the encoded averages are
// then gathered by every island and decoded. Partial sums are never re-encoded, and every
// rank decodes the same bytes, so all replicas end bit-identical. Each rank keeps the
// outer momentum of its share only; the updated shares are gathered inside the island.
//
// Streaming: the buffer is cut into `segments` (e.g. layers); segment j belongs to
// fragment j mod F. Fragment p is exchanged at inner steps o_p, o_p + H, ... with
// o_p = (p+1)·H/F, in the background (on this object's own thread and communicators),
// and applied `overlap` (τ) inner steps later: θ ← (1 − mix)·θ_global + mix·θ_local
// (mix 0: replaced by the global values). F = 1, τ = 0 is plain DiLoCo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/strata.hpp"
#include "strata/wire_format.hpp"

namespace strata {

struct OuterSyncConfig {
  float lr = 0.7f;        // outer learning rate
  float momentum = 0.9f;  // 0: no momentum buffer (plain SGD on the averaged Δ)
  bool nesterov = true;   // false: heavy-ball momentum
  WireFormat format = WireFormat::fp32;
  // 0: the groups of the communicator's outermost hierarchy level (e.g. hosts); K > 0:
  // K islands of consecutive ranks, each a union of those groups.
  int islands = 0;
  int every = 1;      // H: inner steps between two syncs of a fragment (step())
  int fragments = 1;  // F
  int overlap = 0;    // τ: inner steps between a fragment's exchange and its application, < H
  float mix = 0.0f;   // α in [0, 1]: weight of the local values when a fragment is applied
};

// Counters since creation (or load_state), this rank's.
struct OuterSyncStats {
  uint64_t exchanges = 0;   // fragment exchanges completed
  uint64_t bytes_sent = 0;  // bytes this rank sent to other islands
  double exposed_s = 0;     // time step()/sync()/finish() spent waiting for exchanges
};

class OuterSync {
 public:
  OuterSync();
  // Collective over `comm`. Every rank passes the same configuration and count, and starts
  // from the same parameters (both are checked). `params` (count floats) must stay valid
  // while the object lives. `segments`: lengths of consecutive pieces of the buffer,
  // summing to count; empty: F pieces of (nearly) equal length. A piece may have length 0
  // (a rank that holds part of a model names the model's pieces, 0 for those it lacks, so
  // fragment p is the same layers everywhere); a fragment with no elements is not exchanged.
  OuterSync(Comm comm, float* params, size_t count, const OuterSyncConfig& cfg, std::vector<size_t> segments = {});
  ~OuterSync();  // waits for exchanges in flight
  OuterSync(OuterSync&&) noexcept;
  OuterSync& operator=(OuterSync&&) noexcept;

  bool valid() const { return impl_ != nullptr; }
  // Local, after a failure (a rank of another island died): the exchange in flight fails on
  // this rank and its peers (its communicators are aborted), and the object is released
  // without waiting for a peer; it is then empty. Islands that go on make a new OuterSync
  // over the ranks left and load_state what they kept.
  void abort();

  // After each inner step: applies the fragments whose exchange started τ steps ago and
  // starts those due now (with τ = 0 it waits for them and applies them at once).
  void step();
  // Every fragment now: exchange and apply (mix included), blocking. Independent of the
  // step() schedule (for callers that keep their own).
  void sync();
  // Applies every fragment whose exchange is in flight or waiting for its step.
  void finish();

  // Whether the next step() reads or writes the parameters (a fragment's exchange starts
  // or is applied then): a caller that keeps them elsewhere, e.g. in device memory, copies
  // them to and from the buffer around those steps only.
  bool next_step_touches_params() const;
  long long steps() const;  // step() calls so far (or as loaded)
  int islands() const;
  int island() const;       // this rank's island, 0..islands()-1
  int island_size() const;  // g
  OuterSyncStats stats() const;
  // Bytes one exchange of the whole buffer sends from this rank to other islands.
  uint64_t bytes_per_sync() const;

  // For checkpoints. Waits for exchanges in flight. `snapshot` and `momentum` hold count
  // floats in the buffer's order (momentum: -0.0 where no outer step has set it yet,
  // which makes the first update `buf = Δ` exactly, as PyTorch's first step).
  // Collective over the island (the momentum is gathered from its shares).
  void save_state(float* snapshot, float* momentum);
  // Local. The parameters themselves are the caller's to restore; fragments whose
  // application was pending at `steps` are applied at their step as before.
  void load_state(const float* snapshot, const float* momentum, long long steps);
  // The global parameters (the snapshot) in the buffer's order; waits for exchanges in flight.
  void global_params(float* out);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  Impl& checked() const;
};

}  // namespace strata
