#include "tool_main.hpp"

#include <cstdio>
#include <fstream>
#include <algorithm>
#include <iostream>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "results.hpp"

namespace perf {

namespace {

// One rank's run on its backend: the table (rank 0 prints it), the JSON (rank 0 writes it).
int run_rank(const ToolInfo& info, const Options& o, Backend& backend) {
  const int rank = backend.rank();
  if (has_root(o.coll) && o.root >= backend.size()) {
    if (rank == 0)
      std::cerr << info.tool << ": error: root " << o.root << " is not a rank of this " << backend.size()
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
    if (!o.json_path.empty() && backend.all_reduce(json_bad, ScalarOp::max) != 0) {
      if (rank == 0) std::cerr << info.tool << ": error: cannot write '" << o.json_path << "'\n";
      return 2;
    }

    RunSummary summary;
    summary.tool = info.tool;
    summary.version = info.version;
    const int status = run_benchmark(backend, o, summary, std::cout);
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
    backend.abort();
    return 1;
  }
}

// Makes thread `thread`'s backend and runs it; the status.
int start_rank(const ToolInfo& info, const Options& o, const BackendFactory& make_backend, int thread) {
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(o, thread);
  } catch (const std::exception& e) {
    std::cerr << info.tool << ": error: cannot start" << (o.threads > 1 ? " thread " + std::to_string(thread) : "")
              << ": " << e.what() << "\n";
    return 1;
  }
  return run_rank(info, o, *backend);
}

}  // namespace

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
  if (o.threads > 1 && !info.threads) {
    std::cerr << info.tool << ": error: -t " << o.threads << ": " << info.tool
              << " runs one rank per process (only -t 1)\n";
    return 2;
  }
  if (o.threads == 1) return start_rank(info, o, make_backend, 0);
  // Ranks as threads: each makes its communicator and runs the whole benchmark; the
  // status is the worst of theirs.
  std::vector<int> status(static_cast<size_t>(o.threads), 0);
  std::vector<std::thread> ranks;
  for (int t = 0; t < o.threads; ++t)
    ranks.emplace_back([&, t] { status[static_cast<size_t>(t)] = start_rank(info, o, make_backend, t); });
  for (std::thread& r : ranks) r.join();
  int worst = 0;
  for (int s : status) worst = std::max(worst, s);
  return worst;
}

}  // namespace perf
