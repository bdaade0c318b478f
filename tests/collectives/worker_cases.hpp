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
  bool device = false;  // --device
  bool foreign = false;  // --foreign: device buffers inside a program's own cudaMalloc
  std::vector<std::string> alloc;  // --alloc=user,strata,registered: rank r uses alloc[r % size]
};

// The collectives the case matrix runs: those with data on both sides. Barrier and
// point-to-point are covered by the misc tests.
bool in_matrix(strata::Collective c);

// How a case's call is made: the blocking call, its _async form (both without a stream:
// on device buffers they run on the default stream), or the form with a stream.
enum class Issue { blocking, async, stream };

// One collective call on this rank: its buffers, how it is issued, and its check.
struct CaseBase {
  std::string desc;
  virtual ~CaseBase() = default;
  virtual void prepare() = 0;
  // The call (in device mode on its buffers' device twins); `stream` for Issue::stream.
  virtual strata::Request issue(strata::Comm& c, Issue how, strata::device::Stream stream) = 0;
  // Device mode: its buffers to their twins, or back, queued on `s`.
  virtual void upload(strata::device::Stream s) = 0;
  virtual void download(strata::device::Stream s) = 0;
  virtual std::string check() = 0;  // empty when correct
};

// Issues a prepared case; in device mode between copying its buffers in and out on the
// stream it runs on (`stream`, or the default stream for the forms without one), without
// waiting for either. finish_case() then makes the results readable.
strata::Request start_case(strata::Comm& c, CaseBase& cs, Issue how, strata::device::Stream stream = nullptr);
void finish_case(Issue how, strata::device::Stream stream = nullptr);

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

// Prepares, runs and checks one case, the `index`th: issued in turn as the blocking call,
// its _async form + wait() and (device mode) the form with the worker's stream. A library
// exception ends the program (the ranks are out of step).
void run_case(strata::Comm& comm, Reporter& rep, CaseBase& cs, size_t index);

// The point-to-point, group, async, barrier and split tests.
void run_misc_tests(strata::Comm& comm, Reporter& rep, const std::vector<strata::DataType>& types, uint64_t seed);

}  // namespace strata_test
