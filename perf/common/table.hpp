// nccl-tests' stdout table: the run preamble, the three header lines, one row per size
// (key columns, then out-of-place and in-place results), and the footer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace perf {

struct RowKey {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;  // "none" for data-movement collectives
  int root = -1;   // -1 where the collective has no root
};

struct SideResult {
  double time_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  bool checked = false;  // false: "N/A" in #wrong
  int64_t wrong = 0;
  bool skipped = false;  // not run (-I 0): every field "N/A"
  // -z 1: a bare barrier's time, timed over as many barriers right after the calls (each
  // call's time includes one), so time_us - barrier_us is a call's latency; < 0 otherwise.
  double barrier_us = -1;
};

// nccl-tests' number style for a field of `width`: 2, 1 or 0 decimals as the integer
// part grows, exponent form past that.
std::string format_number(double value, int width);

struct Preamble {
  std::string tool;        // "strata-perf"
  std::string version;     // "0.1.0"
  std::string backend;     // "strata", "mpi", "gloo"
  std::string collective;  // "all_reduce"
  uint64_t min_bytes = 0, max_bytes = 0, step_bytes = 0, step_factor = 1;
  int warmup_iters = 0, iters = 0, check = 0;
  bool blocking = false;
  int nranks = 1;
  int pid = 0;
  std::string hostname;
  std::string device;  // after "device  0": "[host] strata", "[cuda] NVIDIA H100 80GB HBM3"
};
std::vector<std::string> preamble_lines(const Preamble& p);

std::vector<std::string> header_lines(bool cputime);
std::string row_key(const RowKey& k);
std::string row_side(const SideResult& r);
std::vector<std::string> footer_lines(int error_count, double avg_busbw, const std::string& collective);

}  // namespace perf
