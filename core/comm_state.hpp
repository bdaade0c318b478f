// What a communicator is made of. Its parts do not know each other: the operation queue
// (order), the plan cache (plans by call), the engine (runs a plan over the links); this
// struct is the glue that core/comm.cpp (the calls) and core/comm_create.cpp (creation,
// split) share.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/engine.hpp"
#include "core/op_queue.hpp"
#include "core/plan_cache.hpp"
#include "ground/call.hpp"
#include "ground/settings.hpp"
#include "strata/strata.hpp"

namespace strata {

struct CommState {
  enum Life { live, destroyed, aborted };

  int rank = 0, nranks = 1;
  Config cfg;
  bootstrap::Secret secret{};
  uint64_t tag = 1;
  uint64_t splits = 0;
  std::vector<bootstrap::RankInfo> table;
  Hierarchy hier;
  std::unique_ptr<Engine> engine;
  std::vector<char> scratch;
  PlanCache plans;
  OpQueue queue;  // after engine: destroyed (stopped) first
  std::atomic<Life> life{live};

  int group_depth = 0;
  std::vector<P2POp> group;

  ~CommState() {
    if (life.load() == live) shutdown(true);
  }

  static const CommState& of(const Comm& c) { return c.checked(); }
  // The communicator over `table`'s ranks, connected (core/comm_create.cpp).
  static Comm create(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table, const net::Fd& listener,
                     const bootstrap::Secret& secret, uint64_t tag, const Config& cfg,
                     const std::vector<LevelSpec>& spec);

  // A checked collective or point-to-point call: run now (blocking) or queued.
  Request start(const Call& call, bool blocking);
  // A group of point-to-point transfers as one operation.
  Request run_group(std::vector<P2POp> ops, bool blocking);
  void shutdown(bool goodbye);
  void abort_now();

 private:
  void execute(const Call& call);
  Plan build_plan_for(const Call& call, bool forward) const;
};

}  // namespace strata
