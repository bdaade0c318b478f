// Pipeline schedules as data: the order in which one stage runs the forward and backward
// passes of M microbatches through its V chunks. Stage p of P holds virtual stages p,
// P + p, ..., (V-1)P + p (chunk v is virtual stage vP + p); microbatch m flows forward
// through virtual stages 0 .. VP-1 and its gradient back.
//
//   gpipe        every forward, then every backward (all M microbatches in flight)
//   1f1b         P - p - 1 warm-up forwards, then one forward and one backward in turn,
//                then the remaining backwards: at most P - p microbatches in flight
//                (PipeDream-Flush, Megatron-LM's default)
//   interleaved  1F1B over V chunks per stage (Narayanan et al. 2021): microbatches go
//                in groups of P through chunk 0, then chunk 1, ...; the bubble shrinks
//                by V at the cost of V times as many messages. Needs M divisible by P.
//
// With forward and backward of a stage taking tf and tb, GPipe and 1F1B idle each stage
// for (P-1)(tf+tb) of a step of (M+P-1)(tf+tb): bubble fraction (P-1)/(M+P-1);
// interleaved idles (P-1)(tf+tb)/V: fraction (P-1)/(VM+P-1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "layout.hpp"

namespace strata::train {

enum class Schedule { gpipe, one_f_one_b, interleaved };

// "gpipe", "1f1b", "interleaved"; nothing for another word.
std::optional<Schedule> parse_schedule(const std::string& text);
const char* schedule_name(Schedule s);

struct PipeAction {
  bool forward;
  int chunk;  // 0 .. V-1 on this stage
  int microbatch;
};

// The actions of `stage` (0 .. P-1), in order. forward_only: the forwards alone, in the
// order a training step would run them (evaluation).
std::vector<PipeAction> pipeline_schedule(Schedule s, int P, int V, int M, int stage,
                                          bool forward_only = false);

// The layers of virtual stage s of S = P*V: L/S each, the first L%S stages one more
// (the last stage also computes the head); the embedding goes with virtual stage 0 and
// the head with S-1. Stage p's chunks are virtual stages p, P + p, ..., (V-1)P + p.
std::vector<Chunk> stage_chunks(int layers, int P, int V, int stage);
// "stage 0: embedding, layers 0-2 | stage 1: layers 3-4, head"; a stage's chunks are
// separated by ";".
std::string describe_stages(int layers, int P, int V);

// The bubble fraction above for these sizes (V = 1 unless interleaved).
double bubble_formula(Schedule s, int P, int V, int M);

}  // namespace strata::train
