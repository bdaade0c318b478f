#include "tool_main.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include "bench.hpp"
#include "results.hpp"

namespace perf {

int tool_main(int argc, char** argv, const ToolInfo& info, const BackendFactory& make_backend) {
  std::vector<std::string> args(argv, argv + argc);
  const ParseResult parsed = parse_options(args);
  if (!parsed.error.empty()) {
    std::cerr << info.tool << ": error: " << parsed.error << "\n"
              << "Run '" << info.tool << " -h' for usage.\n";
    return 2;
  }
  if (parsed.options.help) {
    std::cout << usage(info.tool) << info.more_usage;
    return 0;
  }
  const Options& o = parsed.options;

  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(o);
  } catch (const std::exception& e) {
    std::cerr << info.tool << ": error: cannot start: " << e.what() << "\n";
    return 1;
  }
  const int rank = backend->rank();

  if (has_root(o.coll) && o.root >= backend->size()) {
    if (rank == 0)
      std::cerr << info.tool << ": error: root " << o.root << " is not a rank of this " << backend->size()
                << "-rank job\n";
    return 2;
  }

  try {
    // The JSON file is opened up front so that a bad path fails before the run, on all ranks.
    std::ofstream json;
    double json_bad = 0;
    if (!o.json_path.empty() && rank == 0) {
      json.open(o.json_path, std::ios::out | std::ios::trunc);
      json_bad = json ? 0 : 1;
    }
    if (!o.json_path.empty() && backend->all_reduce(json_bad, ScalarOp::max) != 0) {
      if (rank == 0) std::cerr << info.tool << ": error: cannot write '" << o.json_path << "'\n";
      return 2;
    }

    RunSummary summary;
    summary.tool = info.tool;
    summary.version = info.version;
    const int status = run_benchmark(*backend, o, summary, std::cout);
    if (json.is_open()) {
      json << results_json(summary);
      json.close();
      if (!json) {
        std::cerr << info.tool << ": error: writing '" << o.json_path << "' failed\n";
        return 1;
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << info.tool << ": [rank " << rank << "] error: " << e.what() << "\n";
    backend->abort();
    return 1;
  }
}

}  // namespace perf
