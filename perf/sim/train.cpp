#include "train.hpp"

#include <cstdio>
#include <map>

#include "algorithms/outer_layout.hpp"
#include "device/choose.hpp"
#include "diloco.hpp"
#include "layout.hpp"
#include "options.hpp"
#include "pipeline_schedule.hpp"
#include "rank_grid.hpp"
#include "strata/wire_format.hpp"
#include "traffic.hpp"
#include "trainer.hpp"

namespace strata::sim {

namespace {

namespace st = strata::train;

// One call of `call` (count per the API, for a group of the groups' size) on every group
// at once, each over its members' hierarchy with the library's choice for it, as a
// communicator split from the job would run it. Seconds until the slowest rank is done.
double on_groups(const Model& m, const std::vector<std::vector<int>>& groups, SimCall call) {
  const int n = m.cluster.nranks();
  std::vector<int> group_of(static_cast<size_t>(n), -1), index(static_cast<size_t>(n), -1);
  std::vector<Hierarchy> hier;
  std::vector<PlanChoice> choice;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].size(); ++i)
      group_of[static_cast<size_t>(groups[g][i])] = static_cast<int>(g),
      index[static_cast<size_t>(groups[g][i])] = static_cast<int>(i);
    hier.push_back(restrict_hierarchy(m.hierarchy, groups[g]));
  }
  for (size_t g = 0; g < groups.size(); ++g)
    choice.push_back(choose(m.cluster, hier[g], call, std::nullopt, &groups[g]));
  const PlanSet plans = compact_plans(m.cluster, call, [&](int r) {
    const int g = group_of[static_cast<size_t>(r)];
    if (g < 0 || groups[static_cast<size_t>(g)].size() < 2) return Plan{};
    CollArgs a = choice[static_cast<size_t>(g)].args;
    a.rank = index[static_cast<size_t>(r)];
    Plan p = build_plan(choice[static_cast<size_t>(g)].algo, a);
    for (Step& s : p.steps)
      if (s.peer >= 0) s.peer = groups[static_cast<size_t>(g)][static_cast<size_t>(s.peer)];
    return p;
  });
  return replay(m.fabric, plans, {0, 1}).slowest_s;
}

// Every rank sends `bytes` to its next stage and receives from its previous one, as the
// pipeline's grouped sends do (one round): the slowest pair's time.
double pipeline_hop(const Model& m, const std::vector<std::pair<int, int>>& hops, size_t bytes) {
  std::vector<std::vector<P2POp>> ops(static_cast<size_t>(m.cluster.nranks()));
  char* const buf = reinterpret_cast<char*>(uintptr_t{1} << 20);  // addresses the plan only carries
  for (auto [from, to] : hops) {
    ops[static_cast<size_t>(from)].push_back({true, buf, bytes, to});
    ops[static_cast<size_t>(to)].push_back({false, buf + bytes, bytes, from});
  }
  const SimCall call{Collective::send, bytes, DataType::uint8, ReduceOp::sum, 0, false};
  const PlanSet plans = compact_plans(m.cluster, call, [&](int r) { return p2p_plan(ops[static_cast<size_t>(r)], r); });
  return replay(m.fabric, plans, {0, 1}).slowest_s;
}

std::string mb(double bytes) {
  char b[32];
  if (bytes < 1e3) std::snprintf(b, sizeof b, "%.0f B", bytes);
  else std::snprintf(b, sizeof b, bytes >= 1e6 ? "%.2f MB" : "%.1f KB", bytes >= 1e6 ? bytes / 1e6 : bytes / 1e3);
  return b;
}

}  // namespace

TrainPrediction predict_training(const Model& m, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  st::Options o = st::parse_options(static_cast<int>(argv.size()), argv.data());
  TrainPrediction out;
  const int world = m.cluster.nranks();
  st::validate_options(o, world, /*launched=*/true, st::default_device);
  const int K = st::diloco_on(o) ? o.outer.islands : 1, island = world / K;
  st::GridShape shape;
  shape.size[st::kTp] = o.tp;
  shape.size[st::kPp] = o.pp;
  shape.size[st::kDp] = o.dp / K;
  if (!o.layout.empty()) shape.order = st::parse_grid_order(o.layout);
  // Islands are blocks of consecutive ranks with the same shape: one grid, placed K times.
  std::vector<int> first_island(static_cast<size_t>(island));
  for (int r = 0; r < island; ++r) first_island[static_cast<size_t>(r)] = r;
  const Hierarchy island_hier = restrict_hierarchy(m.hierarchy, first_island);
  std::vector<st::GridLevel> levels;
  for (const Level& l : island_hier.levels) levels.push_back({l.name, l.group});
  const st::RankGrid grid(shape, levels);
  auto groups_along = [&](st::Dim d) {
    std::vector<std::vector<int>> out;
    for (int k = 0; k < K; ++k)
      for (int r = 0; r < island; ++r)
        if (grid.coord(r, d) == 0) {
          std::vector<int> g = grid.group(d, r);
          for (int& x : g) x += k * island;
          out.push_back(g);
        }
    return out;
  };
  const bool dp_is_world = shape.size[st::kDp] == shape.ranks() && o.tp * o.pp == 1;
  const double N = static_cast<double>(o.batch / o.dp / o.microbatches) * o.model.ctx, C = o.model.dim;
  const bool sp = o.sequence_parallel && o.tp > 1;
  const int P = o.pp, V = o.virtual_stages;

  char line[512];
  std::snprintf(
      line, sizeof line,
      "GPT: %d layers, dim %d, %d heads, vocab %d, ctx %d; batch %d in %d microbatches; tp %d x pp %d x dp %d%s%s, "
      "zero %d, %s schedule",
      o.model.layers, o.model.dim, o.model.heads, o.model.vocab, o.model.ctx, o.batch, o.microbatches, o.tp, o.pp, o.dp,
      K > 1 ? (" in " + std::to_string(K) + " DiLoCo islands").c_str() : "", sp ? ", sequence parallel" : "", o.zero,
      o.schedule.c_str());
  out.header.push_back(line);
  out.header.push_back("groups: tp " + grid.placement(grid.group(st::kTp, 0)) + ", pp " +
                       grid.placement(grid.group(st::kPp, 0)) + ", dp " + grid.placement(grid.group(st::kDp, 0)));

  // The same call simulated once, whatever stage asks for it.
  std::map<std::tuple<int, int, size_t>, double> seen;
  auto collective_time = [&](st::Dim d, Collective coll, size_t count) {
    auto key = std::make_tuple(static_cast<int>(d), static_cast<int>(coll), count);
    auto it = seen.find(key);
    if (it != seen.end()) return it->second;
    return seen[key] =
               count ? on_groups(m, groups_along(d), {coll, count, DataType::float32, ReduceOp::sum, 0, false}) : 0;
  };

  double hop = -1;
  for (int stage = 0; stage < P; ++stage) {
    const st::ParamLayout lay(o.model, st::partition_of(o, 0, stage), shape.size[st::kDp], st::bucket_elems(o));
    const st::Traffic f = st::traffic_formula(o, lay, stage, dp_is_world);
    StageComm stage_comm;
    std::vector<CommLine>& lines = stage_comm.lines;
    if (o.tp > 1) {  // N C floats per all-reduce (with sequence parallelism: all-gather + reduce-scatter)
      CommLine l{"tensor parallel", f[st::ParallelGroups::kTpBytes], 0, 0, ""};
      const size_t nc = static_cast<size_t>(N * C);
      const double per_call = sp ? collective_time(st::kTp, Collective::all_gather, nc / o.tp) +
                                       collective_time(st::kTp, Collective::reduce_scatter, nc / o.tp)
                                 : collective_time(st::kTp, Collective::all_reduce, nc);
      l.calls = l.bytes / (4 * N * C * (sp ? 2 : 1));
      l.seconds = l.calls * per_call;
      l.unit = sp ? "all_gather + reduce_scatter of " + mb(4 * N * C) : "all_reduce of " + mb(4 * N * C);
      lines.push_back(l);
    }
    if (P > 1) {
      CommLine l{"pipeline", f[st::ParallelGroups::kPpBytes], 0, 0, ""};
      const size_t bytes = static_cast<size_t>(4 * (sp ? N / o.tp : N) * C);
      // Every stage's rank sends to the next at once (the last to the first with virtual stages).
      std::vector<std::pair<int, int>> hops;
      for (const auto& g : groups_along(st::kPp))
        for (int s = 0; s < P; ++s)
          if (s + 1 < P || V > 1) hops.push_back({g[static_cast<size_t>(s)], g[static_cast<size_t>((s + 1) % P)]});
      if (hop < 0) hop = pipeline_hop(m, hops, bytes);  // the same for every stage
      l.calls = l.bytes / static_cast<double>(bytes);
      l.seconds = l.calls * hop;
      l.unit = "send of " + mb(static_cast<double>(bytes));
      lines.push_back(l);
      if (f[st::ParallelGroups::kEmbeddingBytes] > 0) {
        CommLine e{"tied embedding", f[st::ParallelGroups::kEmbeddingBytes], 0, 0, ""};
        std::vector<std::vector<int>> pairs;
        for (const auto& g : groups_along(st::kPp)) pairs.push_back({g.front(), g.back()});
        const size_t count = static_cast<size_t>(e.bytes / 4);
        e.calls = 1;
        e.seconds = on_groups(m, pairs, {Collective::all_reduce, count, DataType::float32, ReduceOp::sum, 0, false});
        e.unit = "all_reduce of " + mb(e.bytes);
        lines.push_back(e);
      }
    }
    if (shape.size[st::kDp] > 1) {  // per bucket: an all-reduce, or a reduce-scatter and an all-gather
      CommLine l{"data parallel", f[st::ParallelGroups::kDpBytes], 0, 0, ""};
      const int D = shape.size[st::kDp];
      for (const st::Bucket& b : lay.buckets()) {
        if (o.zero == 0) {
          l.seconds += collective_time(st::kDp, Collective::all_reduce, b.real);
          ++l.calls;
        } else {
          l.seconds += collective_time(st::kDp, Collective::reduce_scatter, b.padded / D) +
                       collective_time(st::kDp, Collective::all_gather, b.padded / D);
          l.calls += 2;
        }
      }
      l.unit = std::to_string(lay.buckets().size()) + " buckets";
      lines.push_back(l);
    }
    const double job_bytes = f[st::ParallelGroups::kWorldBytes];
    if (job_bytes > 0) {  // the loss and the gradient norm over the whole job
      CommLine l{"whole job", job_bytes, 1, 0, ""};
      l.seconds = on_groups(
          m, {[&] {
            std::vector<int> all(static_cast<size_t>(world));
            for (int r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
            return all;
          }()},
          {Collective::all_reduce, static_cast<size_t>(job_bytes / 4), DataType::float32, ReduceOp::sum, 0, false});
      l.unit = "all_reduce of " + mb(job_bytes);
      lines.push_back(l);
    }
    if (K > 1) {  // DiLoCo: each fragment's exchange across islands, once every H steps
      const Islands isl = find_islands(m.hierarchy, K);
      const OuterLayout ol = outer_layout(lay.padded_size(), {}, o.outer.fragments, isl.count, isl.size, o.outer.every);
      std::vector<std::vector<int>> crossing(static_cast<size_t>(isl.size)), islands_of(static_cast<size_t>(K));
      for (int r = 0; r < world; ++r) {
        crossing[static_cast<size_t>(isl.local[static_cast<size_t>(r)])].push_back(r);
        islands_of[static_cast<size_t>(isl.island[static_cast<size_t>(r)])].push_back(r);
      }
      CommLine l{"outer sync", 0, 0, 0, ""};
      for (const Fragment& fr : ol.fragments) {
        const size_t piece = wire_bytes(o.outer.format, fr.share) / static_cast<size_t>(K);
        const double t =
            on_groups(m, crossing, {Collective::all_to_all, piece, DataType::uint8, ReduceOp::sum, 0, false}) +
            on_groups(m, crossing, {Collective::all_gather, piece, DataType::uint8, ReduceOp::sum, 0, false}) +
            on_groups(m, islands_of, {Collective::all_gather, fr.share, DataType::float32, ReduceOp::sum, 0, false});
        l.seconds += t / o.diloco_h;
        l.bytes += 2.0 * piece * (K - 1) / o.diloco_h;  // sent to other islands
        l.calls += 3.0 / o.diloco_h;
      }
      l.unit = std::to_string(ol.fragments.size()) + " fragments every " + std::to_string(o.diloco_h) + " steps, " +
               kWireFormats[static_cast<int>(o.outer.format)].name;
      lines.push_back(l);
    }
    for (const CommLine& l : lines) stage_comm.seconds += l.seconds;
    out.stages.push_back(std::move(stage_comm));
  }
  for (size_t s = 0; s < out.stages.size(); ++s)
    if (out.stages[s].seconds > out.stages[out.busiest].seconds) out.busiest = s;
  return out;
}

int train_main(const Model& m, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  if (st::parse_options(static_cast<int>(argv.size()), argv.data()).help) {
    std::printf("strata-sim --train --cluster FILE [strata-train's flags]: the communication per step of the\n"
                "layout those flags give, on every rank of the cluster. strata-train's flags:\n\n%s",
                st::usage_text().c_str());
    return 0;
  }
  const TrainPrediction p = predict_training(m, args);
  std::printf("# strata-sim --train: %s\n", m.cluster.describe().c_str());
  for (const std::string& h : p.header) std::printf("# %s\n", h.c_str());
  std::printf(
      "# per step: training/traffic.cpp's bytes on one rank of each stage, and one call of each kind simulated on\n"
      "# every group at once (the library's plans, its tuner's choice per group); communication only, no overlap\n");
  for (size_t s = 0; s < p.stages.size(); ++s)
    std::printf("# stage %zu: %.3f ms of communication per step\n", s, p.stages[s].seconds * 1e3);
  const StageComm& w = p.stages[p.busiest];
  std::printf("# the busiest stage, %zu, per step:\n", p.busiest);
  std::printf("%-16s %14s %10s %12s %7s  %s\n", "# group", "bytes", "calls", "time (ms)", "share", "one call");
  for (const CommLine& l : w.lines)
    std::printf("  %-14s %14s %10.2f %12.3f %6.1f%%  %s\n", l.what.c_str(), mb(l.bytes).c_str(), l.calls,
                l.seconds * 1e3, w.seconds > 0 ? 100 * l.seconds / w.seconds : 0.0, l.unit.c_str());
  std::printf("  %-14s %14s %10s %12.3f\n", "total", "", "", w.seconds * 1e3);
  return 0;
}

}  // namespace strata::sim
