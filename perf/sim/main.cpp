// strata-sim: Strata's own plans for every rank, replayed over a modelled cluster, with
// strata-perf's command line and nccl-tests' table (docs/simulator.md).
//
//   strata-sim all_reduce --cluster perf/sim/clusters/superpod-1k.cluster -b 1M -e 1G -f 4
//   strata-sim all_reduce --cluster ... --compare        every algorithm, the tuner's marked
//   strata-sim --train --cluster ... --tp 8 --pp 4 ...   a trainer layout's communication
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/connections.hpp"
#include "algorithms/tuner.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "options.hpp"
#include "results.hpp"
#include "simulate.hpp"
#include "sweep.hpp"
#include "table.hpp"
#include "train.hpp"

namespace strata::sim {
namespace {

constexpr const char* kTool = "strata-sim";

// The simulator's own flags; everything else is strata-perf's (perf/common/options).
struct SimFlags {
  std::string cluster;
  std::optional<Algo> algo;
  bool compare = false;
  long ranks = 0;
  bool train = false;
  bool help = false;
  std::vector<std::string> rest;  // for perf::parse_options, or the trainer's flags
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string algo_names() {
  std::string s;
  for (Algo a : kAllAlgos) s += (s.empty() ? "" : " ") + std::string(name(a));
  return s;
}

SimFlags take_flags(const std::vector<std::string>& args) {
  SimFlags f;
  f.rest.push_back(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i], value;
    const size_t eq = a.find('=');
    const bool inline_value = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) value = a.substr(eq + 1), a = a.substr(0, eq);
    auto take = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= args.size()) throw UsageError("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--cluster") {
      f.cluster = take();
    } else if (a == "--algo") {
      const std::string v = take();
      for (Algo x : kAllAlgos)
        if (v == name(x)) f.algo = x;
      if (!f.algo) throw UsageError("--algo '" + v + "' is not an algorithm (" + algo_names() + ")");
    } else if (a == "--ranks") {
      const std::string v = take();
      char* end = nullptr;
      f.ranks = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || f.ranks < 1 || f.ranks > (1 << 24)) throw UsageError("--ranks '" + v + "' is not a rank count in [1, 16777216]");
    } else if (a == "--compare" && !inline_value) {
      f.compare = true;
    } else if (a == "--train" && !inline_value) {
      f.train = true;
    } else if ((a == "-h" || a == "--help") && !inline_value) {
      f.help = true;
      f.rest.push_back(args[i]);
    } else {
      f.rest.push_back(args[i]);
    }
  }
  return f;
}

std::string usage() {
  return "USAGE: strata-sim <collective> --cluster FILE [strata-perf's flags] [--algo NAME] [--compare] [--ranks N]\n"
         "       strata-sim --train --cluster FILE [--ranks N] [strata-train's flags]\n"
         "  --cluster FILE  the cluster description (docs/simulator.md; examples in perf/sim/clusters)\n"
         "  --ranks N       resize the cluster's outermost level to N ranks in all\n"
         "  --algo NAME     run this algorithm (as STRATA_ALGO), not the tuner's choice: " + algo_names() + "\n"
         "  --compare       every algorithm that applies, side by side; the tuner's choice marked\n"
         "  --train         the communication of a strata-train layout per step (its flags follow)\n"
         "  strata-perf's flags as there, with other defaults: -n 1 (simulated calls), -w 0, -c 0\n"
         "  (-c 1: prove each row's plans symbolically; #wrong counts the ranks whose output is wrong)\n\n" +
         perf::usage("strata-sim");
}

long peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, bytes >= 1e9 ? "%.2f GB" : bytes >= 1e6 ? "%.1f MB" : "%.1f KB",
                bytes >= 1e9 ? bytes / 1e9 : bytes >= 1e6 ? bytes / 1e6 : bytes / 1e3);
  return b;
}

void print_links(const SideRun& run, uint64_t size) {
  std::printf("# links at %llu B (%s), per call: the bytes each link carries, and the busiest moment of the busiest one\n",
              static_cast<unsigned long long>(size), run.algo.c_str());
  std::printf("#  %-10s %8s %8s %12s %12s %10s %7s %6s %12s\n", "level", "links", "used", "bytes max", "bytes mean",
              "busiest", "of cap", "flows", "at (us)");
  for (const LevelUse& u : run.replay.levels) {
    if (!u.links_used) {
      std::printf("#  %-10s %8zu %8zu %12s\n", u.name.c_str(), u.links, u.links_used, "-");
      continue;
    }
    std::printf("#  %-10s %8zu %8zu %12s %12s %7.2f GB/s %6.0f%% %6d %12.1f\n", u.name.c_str(), u.links, u.links_used,
                mb(u.bytes_max).c_str(), mb(u.bytes_mean).c_str(), u.peak_Bps / 1e9, 100 * u.peak_Bps / u.peak_capacity_Bps,
                u.peak_flows, u.peak_time_s * 1e6);
  }
}

void print_cost(const SideRun& run, int nranks) {
  std::string held;
  if (run.held_ranks < nranks)
    held = " (" + std::to_string(run.held_ranks) + " ranks held, each standing for " + std::to_string(nranks / run.held_ranks) +
           " by rotation symmetry)";
  std::printf("# cost of the largest row: %d ranks%s, %zu plan steps, %s compact, largest plan %s; plans built in %.2f s, "
              "replayed in %.2f s (%zu messages, %zu rate recomputations); peak RSS %ld MB\n",
              nranks, held.c_str(), run.steps, mb(static_cast<double>(run.compact_bytes)).c_str(),
              mb(static_cast<double>(run.largest_plan_bytes)).c_str(), run.build_s, run.replay_s, run.replay.messages,
              run.replay.reallocations, peak_rss_mb());
}

// What creating the communicator and this plan's first call cost, from the functions the
// library picks its peers with (algorithms/connections.hpp) and the plans simulated. The
// time is a model, not a replay: each bootstrap hop is a connection (3 round trips) and the
// table's transfer over the outermost links; the first call's connections are made at
// once, each 3 round trips.
void print_creation(const SideRun& run, const Model& m, int n) {
  int depth = 0;
  for (int r = 0; r < n; ++r) {
    int hops = 1;  // the root to rank 0
    for (int p = r; p > 0; p = bootstrap_parent(p)) ++hops;
    depth = std::max(depth, hops);
  }
  const double table = static_cast<double>(n) * sizeof(bootstrap::RankInfo);
  const LinkModel top = cross_link(m.hierarchy);
  const double hop_s = 6 * top.latency_s + table / top.bandwidth_Bps;
  std::printf("# creation at %d ranks: the bootstrap table (%s) reaches the last rank after %d hops down a binomial tree "
              "(about %.2f ms modelled); each rank then holds %zu overlay connections. This plan's first call connects "
              "%d peers at most per rank (%.1f mean), %.0f connections in the job\n",
              n, mb(table).c_str(), depth, depth * hop_s * 1e3, overlay_peers(0, n).size(), run.connections_max,
              run.connections_mean, run.connections_mean * n / 2);
}

perf::SideResult side(const perf::Coll& coll, uint64_t bytes, int n, const SideRun& run) {
  perf::SideResult s;
  const perf::Bandwidth bw = perf::bandwidth(coll, bytes, run.replay.time_s, n);
  s.time_us = run.replay.time_s * 1e6;
  s.algbw = bw.algbw;
  s.busbw = bw.busbw;
  s.checked = run.proof.has_value();
  if (run.proof) s.wrong = run.proof->ok ? 0 : std::max(1, run.proof->wrong_ranks);
  return s;
}

struct Row {
  uint64_t bytes;
  SimCall call;
};

std::vector<Row> rows(const perf::Options& o, Collective coll, DataType type, ReduceOp op, int root, int n) {
  std::vector<Row> out;
  for (uint64_t bytes : perf::size_sweep(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor)) {
    const size_t esz = size_of(type);
    const size_t count = perf::call_count(coll, bytes / esz, n);
    if (count == 0)
      throw UsageError("a size of " + std::to_string(bytes) + " B gives a count of 0 (" + name(type) + ", " +
                       std::to_string(n) + " ranks): nothing to simulate; raise -b");
    out.push_back({perf::row_bytes(coll, count, n, esz), {coll, count, type, op, root, false}});
  }
  return out;
}

// One algorithm of a --compare row: its simulation, or why the simulator refused it.
struct CompareRun {
  Algo algo;
  std::optional<SideRun> run;
  std::string refused;
};

int compare(const Model& m, const perf::Options& o, Collective coll, const ReplayOptions& ro) {
  const int n = m.cluster.nranks();
  nlohmann::ordered_json json_rows = nlohmann::ordered_json::array();
  for (DataType type : o.types)
    for (ReduceOp op : perf::has_op(coll) ? o.ops : std::vector<ReduceOp>{ReduceOp::sum})
      for (const Row& row : rows(o, coll, type, op, o.root < 0 ? 0 : o.root, n)) {
        const PlanChoice tuned = choose(m.cluster, m.hierarchy, row.call, std::nullopt);
        std::vector<CompareRun> runs;
        for (Algo a : applicable(m, row.call)) {
          runs.push_back({a, std::nullopt, ""});
          try {
            runs.back().run = simulate(m, row.call, a, ro, false);
          } catch (const PlanTooLarge& e) {
            runs.back().refused = e.what();
          }
        }
        std::optional<size_t> best, mine;
        for (size_t i = 0; i < runs.size(); ++i) {
          if (runs[i].algo == tuned.algo) mine = i;
          if (runs[i].run && (!best || runs[i].run->replay.time_s < runs[*best].run->replay.time_s)) best = i;
        }
        std::printf("# %s %s %s, %llu B: time (us), busbw (GB/s); * the tuner's choice, + the fastest simulated\n",
                    name(coll), name(type), perf::has_op(coll) ? name(op) : "", static_cast<unsigned long long>(row.bytes));
        for (size_t i = 0; i < runs.size(); ++i) {
          const CompareRun& c = runs[i];
          const char marks[] = {i == mine ? '*' : ' ', i == best ? '+' : ' ', 0};
          if (!c.run) {
            std::printf("  %-20s %12s %8s %s  refused: %s\n", name(c.algo), "-", "-", marks, c.refused.c_str());
            continue;
          }
          const perf::SideResult s = side(coll, row.bytes, n, *c.run);
          std::printf("  %-20s %12s %8s %s  predicted by the tuner %10.1f us%s\n", name(c.algo),
                      perf::format_number(s.time_us, 12).c_str(), perf::format_number(s.busbw, 8).c_str(), marks,
                      c.run->choice.predicted_s * 1e6,
                      c.run->algo != name(c.algo) ? ("  (runs as " + c.run->algo + ")").c_str() : "");
        }
        nlohmann::ordered_json jrow{{"collective", name(coll)}, {"type", name(type)}, {"size", row.bytes},
                                    {"count", row.call.count}, {"tuner", name(tuned.algo)},
                                    {"tuner_predicted_us", tuned.predicted_s * 1e6}, {"algorithms", {}}};
        for (const CompareRun& c : runs) {
          nlohmann::ordered_json j{{"algorithm", name(c.algo)}};
          if (c.run) {
            j["time_us"] = c.run->replay.time_s * 1e6;
            j["predicted_us"] = c.run->choice.predicted_s * 1e6;
            j["runs_as"] = c.run->algo;
          } else {
            j["refused"] = c.refused;
          }
          jrow["algorithms"].push_back(j);
        }
        json_rows.push_back(jrow);
        if (!mine || !best) {
          std::printf("# the tuner picks %s; %s\n", name(tuned.algo),
                      best ? "the simulator refused it here" : "the simulator refused every algorithm here");
          continue;
        }
        const double ratio = runs[*mine].run ? runs[*mine].run->replay.time_s / runs[*best].run->replay.time_s : 0;
        if (!runs[*mine].run)
          std::printf("# the tuner picks %s, which the simulator refused; %s is the fastest simulated\n", name(tuned.algo),
                      name(runs[*best].algo));
        else if (best != mine && ratio > 1.05)
          std::printf("# the tuner picks %s; %s is %.2fx faster here\n", name(tuned.algo), name(runs[*best].algo), ratio);
        else
          std::printf("# the tuner's choice %s is%s the fastest here\n", name(tuned.algo), best == mine ? "" : " within 5% of");
      }
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << nlohmann::ordered_json{{"tool", kTool}, {"cluster", m.cluster.name}, {"ranks", n}, {"rows", json_rows}}.dump(1)
         << "\n";
    if (!json) throw UsageError("cannot write '" + o.json_path + "'");
  }
  return 0;
}

int sweep(const Model& m, const perf::Options& o, Collective coll, std::optional<Algo> forced, const ReplayOptions& ro) {
  const int n = m.cluster.nranks();
  perf::RunSummary summary;
  summary.tool = kTool;
  summary.version = PERF_TOOL_VERSION;
  summary.backend = "sim:" + m.cluster.name;
  summary.collective = name(coll);
  summary.ranks = n;
  summary.options = o;
  std::printf("# %s version %s: %s\n", kTool, PERF_TOOL_VERSION, m.cluster.describe().c_str());
  std::printf("# Collective test starting: %s (every rank's plan replayed over the model; %d call%s timed after %d)\n",
              name(coll), ro.iters, ro.iters > 1 ? "s" : "", ro.warmup);
  std::printf("# the last column: the plan's algorithm (%s)\n", forced ? "--algo" : "the tuner's choice");
  for (const std::string& line : perf::header_lines(false)) std::printf("%s\n", line.c_str());
  double busbw_sum = 0;
  int results = 0;
  std::optional<SideRun> last;
  uint64_t last_bytes = 0;
  const std::vector<int> roots = [&] {
    std::vector<int> v;
    if (!perf::has_root(coll)) return std::vector<int>{0};
    for (int r = o.root < 0 ? 0 : o.root; r < (o.root < 0 ? n : o.root + 1); ++r) v.push_back(r);
    return v;
  }();
  for (DataType type : o.types)
    for (ReduceOp op : perf::has_op(coll) ? o.ops : std::vector<ReduceOp>{ReduceOp::sum})
      for (int root : roots)
        for (Row& row : rows(o, coll, type, op, root, n)) {
          perf::RowRecord rec;
          rec.collective = name(coll);
          rec.key = {row.bytes, row.call.count, name(type), perf::has_op(coll) ? name(op) : "none", perf::has_root(coll) ? root : -1};
          rec.ranks = n;
          SideRun oop = simulate(m, row.call, forced, ro, o.check > 0);
          rec.out_of_place = side(coll, row.bytes, n, oop);
          std::string algo = oop.algo;
          if (o.in_place) {
            row.call.in_place = true;
            const SideRun ip = simulate(m, row.call, forced, ro, o.check > 0);
            rec.in_place = side(coll, row.bytes, n, ip);
            if (ip.algo != algo) algo += "/" + ip.algo;
          } else {
            rec.in_place.skipped = true;
          }
          for (const perf::SideResult* s : {&rec.out_of_place, &rec.in_place}) {
            if (s->skipped) continue;
            busbw_sum += s->busbw, ++results;
            if (s->checked && s->wrong) ++summary.error_count;
          }
          std::printf("%s%s%s  %s\n", perf::row_key(rec.key).c_str(), perf::row_side(rec.out_of_place).c_str(),
                      perf::row_side(rec.in_place).c_str(), algo.c_str());
          std::fflush(stdout);
          if (oop.proof && !oop.proof->ok) std::printf("#  out of place: %s\n", oop.proof->failure.c_str());
          summary.rows.push_back(rec);
          if (!last || row.bytes >= last_bytes) last = std::move(oop), last_bytes = row.bytes;
        }
  summary.avg_busbw = results ? busbw_sum / results : 0;
  for (const std::string& line : perf::footer_lines(summary.error_count, summary.avg_busbw, name(coll)))
    std::printf("%s\n", line.c_str());
  if (last) {
    print_links(*last, last_bytes);
    print_cost(*last, n);
    print_creation(*last, m, n);
  }
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << perf::results_json(summary);
    if (!json) throw UsageError("cannot write '" + o.json_path + "'");
  }
  return summary.error_count ? 1 : 0;
}

int run(int argc, char** argv) {
  const SimFlags f = take_flags(std::vector<std::string>(argv, argv + argc));
  if (f.help && f.cluster.empty()) {
    std::cout << usage();
    return 0;
  }
  if (f.cluster.empty()) throw UsageError("--cluster FILE is needed (examples in perf/sim/clusters)");
  Cluster cluster = load_cluster(f.cluster);
  if (f.ranks) resize_cluster(cluster, f.ranks);
  const Model m(std::move(cluster));
  if (f.train) return train_main(m, f.rest);

  // strata-perf's defaults suit a real run; a simulated call is deterministic.
  std::vector<std::string> args = f.rest;
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-')
    args.insert(args.begin() + 2, {"-n", "1", "-w", "0", "-c", "0"});
  const perf::ParseResult parsed = perf::parse_options(args);
  if (!parsed.error.empty()) throw UsageError(parsed.error);
  if (parsed.options.help) {
    std::cout << usage();
    return 0;
  }
  const perf::Options& o = parsed.options;
  const auto* coll = std::get_if<Collective>(&o.coll);
  if (!coll) throw UsageError(std::string(perf::name(o.coll)) + " is a point-to-point pattern: strata-sim models the collectives");
  if (perf::has_root(o.coll) && o.root >= m.cluster.nranks())
    throw UsageError("root " + std::to_string(o.root) + " is not a rank of this " + std::to_string(m.cluster.nranks()) + "-rank cluster");
  if (f.algo && !supports(*f.algo, *coll))
    throw UsageError(std::string("--algo ") + name(*f.algo) + " does not implement " + name(*coll));
  const ReplayOptions ro{o.warmup_iters, o.iters};
  return f.compare ? compare(m, o, *coll, ro) : sweep(m, o, *coll, f.algo, ro);
}

}  // namespace
}  // namespace strata::sim

int main(int argc, char** argv) {
  using namespace strata::sim;
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << kTool << ": error: " << e.what() << "\nRun 'strata-sim -h' for usage.\n";
    return 2;
  } catch (const ClusterError& e) {
    std::cerr << kTool << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << kTool << ": error: " << e.what() << "\n";
    return 1;
  }
}
