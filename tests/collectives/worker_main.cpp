// strata-test-worker: run under strata-run; checks every collective against a serial
// reference computed locally from deterministic inputs (seed, rank, index).
//
//   strata-run -n 4 -- strata-test-worker [--quick] [--medium] [--big] [--misc|--no-misc]
//       [--colls=all_reduce,...] [--types=float,int8,...] [--ops=sum,...] [--sizes=0,7,...]
//       [--inplace=both|in|out] [--roots=all|one] [--seed=N] [--max-print=N] [--verbose] [--device]
//       [--alloc=user,strata,registered]
//
// With no preset, --quick is assumed. --quick: every collective x type x op at sizes
// 0, 1, 7, 1001 and 4096/size_of(type) +-1, in and out of place, every root at small
// sizes, plus point-to-point, groups, async, barrier and split tests (--misc).
// --medium: 65536 +-1 elements. --big: 64 MiB float32 sum for each collective.
// --device: the same on device buffers (STRATA_DEVICE picks the backend), each call's
// inputs copied in just before it and its outputs out just after it on its stream
// (worker_checks.hpp, DeviceMode); the misc tests' point-to-point calls and groups too.
// --alloc: how host buffers are allocated, rank r taking the (r mod n)-th of the list
// (worker_checks.hpp, AllocMode): zero-copy between some ranks, the FIFO between others.
// Exit status: 0 all passed, 1 a result was wrong, 2 the library threw, 3 other error.
//
// This file: the options and the run. The cases are in worker_collectives.cpp and
// worker_misc.cpp (worker_cases.hpp), the reference and checks in worker_checks.hpp.
#include <strata/strata.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "worker_cases.hpp"

using namespace strata;
using namespace strata_test;

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) v.push_back(x);
  return v;
}

[[noreturn]] void usage(const std::string& why) {
  fprintf(stderr, "strata-test-worker: %s\n", why.c_str());
  exit(3);
}

// The comma-separated names in `list`, each read by `parse` (an empty optional: unknown).
template <class Parse>
auto parse_names(const std::string& list, Parse parse, const char* what) {
  std::vector<typename decltype(parse(std::string()))::value_type> v;
  for (auto& s : split_list(list)) {
    auto x = parse(s);
    if (!x) usage(std::string("unknown ") + what + " " + s);
    v.push_back(*x);
  }
  return v;
}

std::optional<Collective> parse_matrix_collective(const std::string& s) {
  auto c = parse_collective(s);
  return c && in_matrix(*c) ? c : std::nullopt;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < kNumCollectives; ++i)
    if (in_matrix(static_cast<Collective>(i))) o.colls.push_back(static_cast<Collective>(i));
  // Every type but fp8, which has configurations of its own (test_collectives.cpp: fp8_*),
  // so the default matrix's time stays what it was.
  for (int i = 0; i < kNumDataTypes; ++i)
    if (size_of(static_cast<DataType>(i)) > 1 || !is_floating(static_cast<DataType>(i)))
      o.types.push_back(static_cast<DataType>(i));
  for (int i = 0; i < kNumReduceOps; ++i) o.ops.push_back(static_cast<ReduceOp>(i));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* key) -> std::optional<std::string> {
      std::string k = std::string(key) + "=";
      if (a.rfind(k, 0) == 0) return a.substr(k.size());
      return std::nullopt;
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--medium") o.medium = true;
    else if (a == "--big") o.big = true;
    else if (a == "--misc") o.misc = 1;
    else if (a == "--no-misc") o.misc = 0;
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--device") o.device = true;
    else if (a == "--foreign") o.foreign = true;
    else if (auto v = val("--alloc")) o.alloc = split_list(*v);
    else if (auto v = val("--colls")) o.colls = parse_names(*v, parse_matrix_collective, "collective");
    else if (auto v = val("--types")) o.types = parse_names(*v, parse_datatype, "type");
    else if (auto v = val("--ops")) o.ops = parse_names(*v, parse_reduce_op, "op");
    else if (auto v = val("--sizes")) {
      std::vector<size_t> s;
      for (auto& x : split_list(*v)) s.push_back(std::stoull(x));
      o.sizes = s;
    } else if (auto v = val("--inplace")) {
      o.in = *v != "out";
      o.out = *v != "in";
    } else if (auto v = val("--roots")) {
      o.all_roots = *v == "all";
    } else if (auto v = val("--seed")) {
      o.seed = std::stoull(*v);
    } else if (auto v = val("--max-print")) {
      o.max_print = std::stoi(*v);
    } else {
      usage("unknown option " + a);
    }
  }
  if (!o.quick && !o.medium && !o.big && !o.sizes) o.quick = true;
  if (o.misc < 0) o.misc = o.quick ? 1 : 0;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  double t0 = mono_s();
  Reporter rep;
  rep.max_print = o.max_print;
  rep.verbose = o.verbose;
  Comm comm;
  try {
    if (o.device) {
      device_mode().on = true;
      device_mode().foreign = o.foreign;
      device_mode().stream = device::stream_create();
    }
    comm = Comm::init_from_env();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL: Comm::init_from_env threw: %s\n", e.what());
    return 2;
  }
  rep.rank = comm.rank();
  rep.n = comm.size();
  if (!o.alloc.empty()) {
    const std::string& k = o.alloc[static_cast<size_t>(comm.rank()) % o.alloc.size()];
    if (k != "user" && k != "strata" && k != "registered") usage("unknown --alloc " + k);
    alloc_mode().kind = k == "strata" ? AllocMode::strata : k == "registered" ? AllocMode::registered : AllocMode::user;
    alloc_mode().comm = &comm;
  }
  try {
    std::vector<CaseSpec> matrix = build_matrix(o, comm.size());
    uint64_t case_seed = o.seed;
    size_t idx = 0;
    for (const CaseSpec& s : matrix) {
      auto cs = make_case(comm, s.coll, s.type, s.op, s.count, s.inplace, s.root, mix64(++case_seed));
      // every third case through the _async form + wait()
      run_case(comm, rep, *cs, idx++);
    }
    if (o.misc) run_misc_tests(comm, rep, o.types, o.seed);
    comm.destroy();
  } catch (const Error& e) {
    fprintf(stderr, "FAIL rank %d: library threw: %s\n", rep.rank, e.what());
    return 2;
  } catch (const std::exception& e) {
    fprintf(stderr, "FAIL rank %d: exception: %s\n", rep.rank, e.what());
    return 3;
  }
  printf("strata-test-worker rank %d/%d: %ld cases passed, %ld failed (%.2f s)\n", rep.rank,
         rep.n, rep.passed, rep.failed, mono_s() - t0);
  fflush(stdout);
  return rep.failed ? 1 : 0;
}
