// nccl-tests' command line, with the collective as the first word:
//   <tool> all_reduce -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float -o sum [--json FILE]
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "timed_op.hpp"

namespace perf {

// What `-d all` and `-o all` run, in nccl-tests' order.
const std::vector<DataType>& all_datatypes();
// The types -d accepts: all_datatypes() and fp8 (f8e4m3, f8e5m2; not in `-d all`, as in
// nccl-tests, whose fp8 types need a recent NCCL).
bool supported_datatype(DataType t);
const std::vector<ReduceOp>& all_reduce_ops();

// How per-rank times are combined (-a): nccl-tests' 0=rank 0, 1=avg, 2=min, 3=max.
enum class Average { rank0 = 0, avg = 1, min = 2, max = 3 };

struct Options {
  Coll coll = Collective::all_reduce;
  uint64_t min_bytes = 32ull << 20;
  uint64_t max_bytes = 32ull << 20;
  uint64_t step_bytes = 1ull << 20;
  uint64_t step_factor = 1;  // > 1: multiply; else add step_bytes
  int iters = 20;
  int warmup_iters = 5;
  int check = 1;             // number of validation runs per row (0: no #wrong column values)
  std::vector<DataType> types{DataType::float32};  // several with `-d all`
  std::vector<ReduceOp> ops{ReduceOp::sum};        // several with `-o all`
  int root = 0;              // -1: every root in turn
  Average average = Average::avg;
  bool blocking = false;     // -z 1: barrier after each operation
  bool in_place = true;      // -I 0: skip the in-place half of each row
  bool report_cputime = false;  // -C 1: label the time column "cputime" (same measurement)
  std::string json_path;     // --json FILE (rank 0 writes it)
  int threads = 1;           // -t N: ranks as threads of each process (nccl-tests' -t), where the tool can
  bool help = false;
};

// "8", "1K", "64M", "1G", "1.5K" (K/M/G are powers of 1024, either case; an optional
// trailing "B"/"iB"). nullopt for anything else (negative, empty, junk, overflow).
std::optional<uint64_t> parse_size(std::string_view s);

struct ParseResult {
  Options options;
  std::string error;  // non-empty: bad command line (exit status 2)
};

// argv[0] is the program; argv[1] the collective, unless -h/--help.
ParseResult parse_options(const std::vector<std::string>& args);

std::string usage(const std::string& program);

}  // namespace perf
