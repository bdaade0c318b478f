// main() of every driver: parse the command line, start the backend, run, report.
//   exit 0: done, no wrong elements; 1: wrong elements or a runtime failure;
//   2: bad command line (or a root/size that does not fit the job).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend.hpp"
#include "options.hpp"

namespace perf {

struct ToolInfo {
  std::string tool;     // "strata-perf"
  std::string version;  // "0.1.0"
  std::string more_usage;  // the tool's own flags, appended to -h's usage
  bool threads = false;    // -t N > 1: its backend can make ranks that are threads of one process
};

// Creates the backend (joins the job) for thread `thread` of this process's
// Options::threads (0 of 1 unless the tool has threads); throws on failure. With threads
// it is called on each rank's own thread, all at once.
using BackendFactory = std::function<std::unique_ptr<Backend>(const Options&, int thread)>;

int tool_main(int argc, char** argv, const ToolInfo& info, const BackendFactory& make_backend);

}  // namespace perf
