// strata-test-worker's cases: which collectives, element types, operators, sizes,
// placements and roots are run (worker_collectives.cpp), and the tests of everything else
// (point-to-point, groups, async, barrier, split: worker_misc.cpp).
#pragma once

#include <strata/collective.hpp>
#include <strata/strata.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker_checks.hpp"

namespace strata_test {

// What to run (the command line, see worker_main.cpp).
struct Options {
  bool quick = false, medium = false, big = false;
  int misc = -1;  // -1: on when --quick
  std::vector<strata::Collective> colls;
  std::vector<strata::DataType> types;
  std::vector<strata::ReduceOp> ops;
  std::optional<std::vector<size_t>> sizes;
  bool in = true, out = true;
  bool all_roots = true;
  uint64_t seed = 12345;
  int max_print = 10;
  bool verbose = false;
};

// The collectives the case matrix runs: those with data on both sides. Barrier and
// point-to-point are covered by the misc tests.
bool in_matrix(strata::Collective c);

// One collective call on this rank: its buffers, how it is issued, and its check.
struct CaseBase {
  std::string desc;
  virtual ~CaseBase() = default;
  virtual void prepare() = 0;
  virtual void run_blocking(strata::Comm& c) = 0;
  virtual strata::Request launch(strata::Comm& c) = 0;
  virtual std::string check() = 0;  // empty when correct
};

std::unique_ptr<CaseBase> make_case(strata::Comm& comm, strata::Collective coll, strata::DataType t,
                                    strata::ReduceOp op, size_t count, bool inplace, int root, uint64_t seed);

struct CaseSpec {
  strata::Collective coll;
  strata::DataType type;
  strata::ReduceOp op;
  size_t count;
  bool inplace;
  int root;
};

// The cases `o` asks for on `n` ranks, in the order they run.
std::vector<CaseSpec> build_matrix(const Options& o, int n);

// Prepares, runs (blocking, or the _async form + wait()) and checks one case; a library
// exception ends the program (the ranks are out of step).
void run_case(strata::Comm& comm, Reporter& rep, CaseBase& cs, bool use_async);

// The point-to-point, group, async, barrier and split tests.
void run_misc_tests(strata::Comm& comm, Reporter& rep, const std::vector<strata::DataType>& types, uint64_t seed);

}  // namespace strata_test
