// strata-test-worker's cases: what runs (the options), the matrix of collective cases and
// the other tests (point-to-point, groups, async, barrier, split).
#pragma once

#include "worker_checks.hpp"

namespace strata_test {

// The six collectives the worker checks, in its order.
inline constexpr Collective kAllColls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                                           Collective::broadcast,  Collective::reduce,         Collective::all_to_all};

struct Options {
  bool quick = false, medium = false, big = false;
  int misc = -1;  // -1: on when --quick
  std::vector<Collective> colls{std::begin(kAllColls), std::end(kAllColls)};
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  std::optional<std::vector<size_t>> sizes;
  bool in = true, out = true;
  bool all_roots = true;
  uint64_t seed = 12345;
};


struct CaseSpec {
  Collective coll;
  DataType type;
  ReduceOp op;
  size_t count;
  bool inplace;
  int root;
};


struct CaseBase {
  std::string desc;
  virtual ~CaseBase() = default;
  virtual void prepare() = 0;
  virtual void run_blocking(Comm& c) = 0;
  virtual Request launch(Comm& c) = 0;
  virtual std::string check() = 0;  // empty when correct
};

// One collective case of type t (the worker's own reference checks it).
std::unique_ptr<CaseBase> make_case(Comm& comm, Collective coll, DataType t, ReduceOp op, size_t count, bool inplace,
                                    int root, uint64_t seed);
std::vector<CaseSpec> build_matrix(const Options& o, int n);
// Runs every case of the matrix (every third through the _async form + wait()).
void run_matrix(Comm& comm, const Options& o);
// Point-to-point, groups, async, barrier and split.
void run_misc(Comm& comm, const Options& o);

}  // namespace strata_test
