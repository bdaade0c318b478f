// Megatron-LM's tensor parallelism on the activations of one microbatch (N token rows of
// width C), inside the tensor-parallel group of T ranks.
//
// A column-parallel layer (qkv, c_fc, the vocabulary head) needs every row of its input
// and gives each rank some of the output columns; a row-parallel layer (c_proj) takes
// those columns and gives each rank a partial sum of the whole output. Between them run
// Megatron's conjugate pair:
//
//   f (into a column-parallel layer)   forward: identity     backward: all-reduce
//   g (out of a row-parallel layer)    forward: all-reduce   backward: identity
//
// With sequence parallelism (Korthikanti et al.) each rank keeps only its 1/T of the rows
// of the residual stream, so LayerNorm, dropout-free residual adds and biases run on
// N/T rows, and every all-reduce becomes a reduce-scatter or an all-gather:
//
//   f   forward: all-gather the rows     backward: reduce-scatter
//   g   forward: reduce-scatter          backward: all-gather
//
// So the model needs two operations, each serving one direction of f and the other of g:
// gather() (f forward, g backward) and reduce() (g forward, f backward). The rows are
// the B·T token rows of the microbatch cut into T contiguous runs (with one sequence per
// microbatch, runs of its positions), as Megatron cuts the sequence dimension of [s, b, h].
#pragma once

#include <strata/strata.hpp>

#include "group.hpp"
#include "step_clock.hpp"

namespace strata::train {

class TensorParallel {
 public:
  TensorParallel(Group& group, bool sequence_parallel, StepClock& clock)
      : group_(group), sp_(sequence_parallel && group.size() > 1), clock_(clock) {}

  int size() const { return group_.size(); }
  int rank() const { return group_.rank(); }
  bool sequence_parallel() const { return sp_; }
  Group& group() { return group_; }

  // The rows of the residual stream this rank keeps of a microbatch of N rows: all of
  // them, or with sequence parallelism its run [first_row, first_row + rows).
  int rows(int N) const { return sp_ ? N / size() : N; }
  int first_row(int N) const { return sp_ ? rank() * rows(N) : 0; }

  // f forward, g backward: this rank's rows `mine` (rows(N) x C) -> all N rows. Without
  // sequence parallelism they are all the rows already and `mine` is returned; with it
  // they are all-gathered into `all` (`mine` may be this rank's rows inside `all`).
  const float* gather(const float* mine, float* all, int N, int C);
  // g forward, f backward: every rank's partial sums over all N rows -> the summed rows
  // this rank keeps, in `mine`: an all-reduce, or a reduce-scatter.
  void reduce(const float* partial, float* mine, int N, int C);
  // In place over the group (the vocabulary-parallel softmax's max and sums; the
  // sequence-parallel LayerNorm gradients).
  void all_reduce(float* x, size_t n, strata::ReduceOp op);

 private:
  Group& group_;
  bool sp_;
  StepClock& clock_;
};

}  // namespace strata::train
