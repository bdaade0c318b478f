#include "traffic.hpp"

#include <algorithm>
#include <cstdio>

#include "model.hpp"
#include "pipeline_schedule.hpp"

namespace strata::train {
namespace {

// ZeRO-3's gathers in a step, in floats: every layer group a pass opens, unless the set
// of groups opened just before held it too (the head's between a forward and the backward
// that follows it at once).
double zero3_gathers(const Options& o, const ParamLayout& layout, int stage) {
  const std::vector<Chunk>& chunks = layout.partition().chunks;
  const Schedule s = *parse_schedule(o.schedule);
  WeightUses uses;
  for (const PipeAction& a : pipeline_schedule(s, o.pp, o.virtual_stages, o.microbatches, stage)) {
    const WeightUses u = weight_uses(o.model, chunks[a.chunk], a.forward);
    uses.insert(uses.end(), u.begin(), u.end());
  }
  const std::vector<int> none;
  const std::vector<int>* before = &none;
  double floats = 0;
  for (const std::vector<int>& set : uses) {
    for (int g : set)
      if (std::find(before->begin(), before->end(), g) == before->end()) floats += layout.group_span(g).padded;
    before = &set;
  }
  return floats;
}

}  // namespace

Traffic traffic_formula(const Options& o, const ParamLayout& layout, int stage, bool dp_is_world) {
  Traffic f{};
  const double N = static_cast<double>(o.batch / o.dp / o.microbatches) * o.model.ctx;
  const double C = o.model.dim, M = o.microbatches, T = o.tp;
  const bool sp = o.sequence_parallel && o.tp > 1;
  const double r = o.recompute;  // a block's forward collectives once more in its backward
  double L = 0, e = 0, h = 0;
  for (const Chunk& c : layout.partition().chunks) {
    L += c.end_layer - c.first_layer;
    e += c.embedding;
    h += c.head;
  }
  if (o.tp > 1) {
    f[ParallelGroups::kTpBytes] =
        sp ? M * (((8 + 4 * r) * L + 2 * e + 2 * h) * N * C + h * 3 * N) + (4 * L + 2 * h) * C
           : M * (((4 + 2 * r) * L + e + h) * N * C + h * 3 * N);
  }
  const int V = o.virtual_stages, P = o.pp;
  for (int v = 0; v < V && P > 1; ++v) {
    const int s = v * P + stage;  // virtual stage
    const double rows = sp ? N / T : N;
    f[ParallelGroups::kPpBytes] += M * rows * C * ((s < V * P - 1) + (s > 0));
  }
  if (o.dp > 1) {
    double real = 0, padded = 0;
    for (const Bucket& b : layout.buckets()) real += b.real, padded += b.padded;
    // zero 1, 2: a reduce-scatter and an all-gather, zero 3: the reduce-scatter and the
    // gathers; + the norm (a double).
    f[ParallelGroups::kDpBytes] = o.zero == 0 ? real
                                  : o.zero == 3 ? padded + zero3_gathers(o, layout, stage) + 2
                                                : 2 * padded + 2;
  }
  if (P > 1 && (stage == 0 || stage == P - 1)) f[ParallelGroups::kEmbeddingBytes] = o.model.vocab / T * C;
  for (double& x : f) x *= sizeof(float);
  if (o.tp * o.pp * o.dp > 1)
    f[dp_is_world ? ParallelGroups::kDpBytes : ParallelGroups::kWorldBytes] += 4 + (o.tp * o.pp > 1 ? 8 : 0);
  return f;
}

std::string traffic_report(const Options& o, const ParamLayout& layout, int stage, bool dp_is_world,
                           const Traffic& measured) {
  static const char* names[] = {"tensor parallel", "pipeline (sent)", "data parallel",
                                "tied embedding", "whole job"};
  const Traffic f = traffic_formula(o, layout, stage, dp_is_world);
  std::string out = "bytes per step on this rank, per group (collective vector sizes): issued | formula\n";
  char line[160];
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == 0 && measured[i] == 0) continue;
    std::snprintf(line, sizeof line, "  %-16s %14.0f | %14.0f%s\n", names[i], measured[i], f[i],
                  measured[i] == f[i] ? "" : "  (differs)");
    out += line;
  }
  return out;
}

}  // namespace strata::train
