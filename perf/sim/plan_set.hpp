// Every rank's plan for one call, built by the library's own algorithms (the tuner's
// choice, or a forced algorithm as STRATA_ALGO forces it), kept in the compact form the
// replay needs: per round the local work in seconds and the transfers in posting order.
// A rank's Plan is dropped as soon as it is compacted, so 16,384 ranks' plans are never
// held at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/choice.hpp"
#include "cluster.hpp"
#include "strata/types.hpp"

namespace strata::sim {

struct SimCall {
  Collective coll = Collective::all_reduce;
  size_t count = 0;  // the API's count (per rank for reduce_scatter / all_gather)
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
};

// The call as the library's plan choice is given it on rank `rank` (forward: two ranks over
// a link that forwards, an op without finalize; the cluster's memory kind). With
// `members`, for a communicator of those ranks of the cluster (h: theirs), `rank` its
// index there.
CollArgs coll_args(const Cluster& c, const Hierarchy& h, const SimCall& call, int rank,
                   const std::vector<int>* members = nullptr);

// The library's own choice (algorithms/choice.hpp) for this call, with STRATA_CHUNK_BYTES
// unset and `forced` as STRATA_ALGO would force it (an error where it does not implement
// the collective). The choice's args are rank 0's: set args.rank for another rank.
PlanChoice choose(const Cluster& c, const Hierarchy& h, const SimCall& call, std::optional<Algo> forced,
                  const std::vector<int>* members = nullptr);

// A plan set the simulator will not build: more than its budget of memory, or of
// transfers in flight at once (a plan quadratic by nature: direct at 16,384 ranks).
class PlanTooLarge : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a plan set may take: its compact form, and the transfers of one round over all the
// ranks it holds (the flows the network model may have to share out at once).
inline constexpr double kMaxPlanBytes = 1.0 * (1u << 30);
inline constexpr double kMaxRoundTransfers = 4e6;

struct PlanSet {
  enum Kind : uint8_t { send, recv, forward };  // forward: the send half of recv_reduce_send
  struct Xfer {
    uint64_t bytes;
    uint32_t dir;  // index into dirs: (sender, receiver)
    Kind kind;     // recv_reduce_send is a recv followed by a forward
  };
  struct Round {
    uint64_t first;  // first transfer
    double local_s;  // the round's copy, reduce and finalize steps, before its transfers
  };
  // A direction between two ranks. Folded (period < the cluster's ranks), `from` is a
  // representative in [0, period) and `to_real` the real receiver as seen from it; `to` is
  // the representative that plays that receiver (to_real modulo the period).
  struct Dir {
    int from, to, to_real;
    int32_t reverse;  // the direction to -> from, or -1
  };
  std::vector<Xfer> xfers;
  std::vector<Round> rounds;       // every rank's, one after another, then a sentinel
  std::vector<uint64_t> rank_first;  // each rank's first round, then a sentinel
  std::vector<Dir> dirs;
  PlanChoice choice;
  std::string algo;  // the plan's own name (hierarchical falls back to ring where it does not apply)
  // Rotation symmetry: only ranks [0, period) are held, each standing for every rank
  // r + k * period (whose plan is r's moved on: algorithms' rotation_period, checked here on
  // the next period's ranks and the last's). The cluster's rank count: no folding.
  int period = 0;
  size_t steps = 0;  // plan steps over all ranks (folded: the held ranks' times the fold)
  size_t largest_plan_bytes = 0;  // the biggest Plan held while building
  // The connections a held rank makes by this plan's first call (connected on need): its
  // plan's peers and the failure overlay's (algorithms/connections.hpp), as the library
  // connects them. Held ranks stand for the others.
  int connections_max = 0;
  double connections_mean = 0;

  int nranks() const { return static_cast<int>(rank_first.size()) - 1; }
  size_t rounds_of(int r) const { return rank_first[r + 1] - rank_first[r]; }
  size_t memory_bytes() const;
};

// The plans of `choice` for every rank, folded by rotation symmetry where the algorithm
// claims it and the cluster allows it (Cluster::rotation_period), else every rank's.
// PlanTooLarge beyond the budget, before the plans are built (estimated from rank 0's).
PlanSet build_plan_set(const Cluster& c, const Hierarchy& h, const SimCall& call, const PlanChoice& choice);
// The same from any plans: `plan_of(r)` is rank r's (tests give hand-made ones); `period`:
// hold ranks [0, period) only, rank r + k * period's plan being r's moved on (0: all).
PlanSet compact_plans(const Cluster& c, const SimCall& call, const std::function<Plan(int)>& plan_of, int period = 0);

}  // namespace strata::sim
