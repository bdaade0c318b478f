// The results of one run, as rank 0 collects them for the table and the --json file.
#pragma once

#include <string>
#include <vector>

#include "options.hpp"
#include "table.hpp"

namespace perf {

struct RowRecord {
  std::string collective;
  RowKey key;
  int ranks = 1;
  SideResult out_of_place;
  SideResult in_place;
};

struct RunSummary {
  std::string tool;
  std::string version;
  std::string backend;
  std::string collective;
  int ranks = 1;
  Options options;
  std::vector<RowRecord> rows;
  int error_count = 0;  // "Out of bounds values": (rank, row side) pairs with wrong elements
  double avg_busbw = 0;  // mean busbw over all out-of-place and in-place results
};

// {"tool":..., "backend":..., "collective":..., "ranks":..., "config":{...},
//  "results":[{"collective","size","count","type","op","root","ranks",
//              "oop_time_us","oop_algbw","oop_busbw","oop_wrong",
//              "ip_time_us","ip_algbw","ip_busbw","ip_wrong"}, ...],
//  (each side also has "oop_barrier_us" / "ip_barrier_us": with -z 1 a bare barrier's time)
//  "out_of_bounds":N, "avg_busbw":X}
// A wrong count is null where it was not checked.
std::string results_json(const RunSummary& s);

}  // namespace perf
