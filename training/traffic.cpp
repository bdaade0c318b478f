#include "traffic.hpp"

#include <cstdio>

#include "pipeline_schedule.hpp"

namespace strata::train {

Traffic traffic_formula(const Options& o, const ParamLayout& layout, int stage, bool dp_is_world) {
  Traffic f{};
  const double N = static_cast<double>(o.batch / o.dp / o.microbatches) * o.model.ctx;
  const double C = o.model.dim, M = o.microbatches, T = o.tp;
  const bool sp = o.sequence_parallel && o.tp > 1;
  double L = 0, e = 0, h = 0;
  for (const Chunk& c : layout.partition().chunks) {
    L += c.end_layer - c.first_layer;
    e += c.embedding;
    h += c.head;
  }
  if (o.tp > 1) {
    f[ParallelGroups::kTpBytes] =
        sp ? M * ((8 * L + 2 * e + 2 * h) * N * C + h * 3 * N) + (4 * L + 2 * h) * C
           : M * ((4 * L + e + h) * N * C + h * 3 * N);
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
    f[ParallelGroups::kDpBytes] = o.zero == 0 ? real : 2 * padded + 2;  // + the norm (a double)
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
