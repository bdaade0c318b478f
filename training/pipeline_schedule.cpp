#include "pipeline_schedule.hpp"

#include <algorithm>

namespace strata::train {

namespace {
constexpr const char* kNames[] = {"gpipe", "1f1b", "interleaved"};
}

std::optional<Schedule> parse_schedule(const std::string& text) {
  for (int i = 0; i < 3; ++i)
    if (text == kNames[i]) return static_cast<Schedule>(i);
  return std::nullopt;
}

const char* schedule_name(Schedule s) { return kNames[static_cast<int>(s)]; }

std::vector<PipeAction> pipeline_schedule(Schedule s, int P, int V, int M, int stage,
                                          bool forward_only) {
  // The k-th forward (and the k-th backward) of a stage: microbatches in groups of P,
  // each group through chunk 0, 1, ..., V-1 (backward: V-1 down to 0). With V = 1 the
  // k-th is simply microbatch k.
  auto action = [&](int k, bool forward) {
    const int in_group = k % (P * V), chunk = in_group / P;
    return PipeAction{forward, forward ? chunk : V - 1 - chunk, k / (P * V) * P + k % P};
  };
  const int total = M * V;
  int warmup = total;  // gpipe, and evaluation: every forward first
  if (!forward_only && s == Schedule::one_f_one_b) warmup = std::min(P - stage - 1, total);
  // Megatron's: the first chunk's group must have reached the last stage and come back.
  if (!forward_only && s == Schedule::interleaved)
    warmup = std::min((P - stage - 1) * 2 + (V - 1) * P, total);
  std::vector<PipeAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(action(k, true));
  if (forward_only) return out;
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(action(warmup + k, true));
    out.push_back(action(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(action(k, false));
  return out;
}

std::vector<Chunk> stage_chunks(int layers, int P, int V, int stage) {
  const int S = P * V;
  std::vector<Chunk> out;
  for (int v = 0; v < V; ++v) {
    const int s = v * P + stage;
    Chunk c;
    c.first_layer = s * (layers / S) + std::min(s, layers % S);
    c.end_layer = c.first_layer + layers / S + (s < layers % S ? 1 : 0);
    c.embedding = s == 0;
    c.head = s == S - 1;
    out.push_back(c);
  }
  return out;
}

std::string describe_stages(int layers, int P, int V) {
  std::string out;
  for (int p = 0; p < P; ++p) {
    out += std::string(p ? " | " : "") + "stage " + std::to_string(p) + ":";
    const std::vector<Chunk> chunks = stage_chunks(layers, P, V, p);
    for (size_t i = 0; i < chunks.size(); ++i) {
      const Chunk& c = chunks[i];
      out += std::string(i ? ";" : "") + (c.embedding ? " embedding," : "") + " layers " +
             std::to_string(c.first_layer);
      if (c.end_layer - c.first_layer > 1) out += "-" + std::to_string(c.end_layer - 1);
      if (c.head) out += ", head";
    }
  }
  return out;
}

double bubble_formula(Schedule s, int P, int V, int M) {
  const int v = s == Schedule::interleaved ? V : 1;
  return static_cast<double>(P - 1) / (static_cast<double>(v) * M + P - 1);
}

}  // namespace strata::train
