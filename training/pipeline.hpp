// Runs a step's microbatches through this stage's chunks in the order of a pipeline
// schedule, moving activations to the next stage and gradients to the previous one.
//
// Each direction of each neighbour link is its own two-rank communicator: a
// communicator runs its operations in issue order, so a gradient on its way back must
// never queue behind an activation waiting for its receiver. On every link the sender's
// order of messages is the receiver's order of receives (the schedules guarantee it; a
// unit test checks it), so matching in order is enough. A receive is posted when the
// compute needs it and waited for (pipeline idle); sends go out asynchronously.
//
// A microbatch's activations live from its forward to its backward; they come from a
// pool that grows to the most microbatches in flight at once, which is what the peak
// activation memory of a schedule is (GPipe: M, 1F1B: at most P - stage).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "device/buffer.hpp"
#include "group.hpp"
#include "model.hpp"
#include "pipeline_schedule.hpp"
#include "step_clock.hpp"

namespace strata::train {

// Activations go to the next stage and come from the previous one; gradients the other
// way. Stage P-1's next is stage 0 (interleaved: chunk v's output feeds chunk v+1).
struct PipeLinks {
  Group act_out, act_in, grad_out, grad_in;
};

// The sink a pipeline step reports to: it learns when a chunk's last backward of the step
// begins (before it, gradients still accumulate) and when the step's backward is over.
class StepSink : public GradSink {
 public:
  virtual void last_backward(bool last) = 0;
  virtual void backward_done() = 0;
};

class Pipeline {
 public:
  struct Shape {
    Schedule schedule;
    int stages, virtual_stages, microbatches, stage;
    // What each microbatch's loss is multiplied by in backward; 0: 1/microbatches (their
    // mean). strata-train --on-failure shrink gives some ranks more microbatches than others.
    float loss_scale = 0;
  };
  // chunks: this stage's, in forward order (virtual stages stage, stage + P, ...).
  Pipeline(std::vector<Gpt*> chunks, PipeLinks& links, const Shape& shape, StepClock& clock);
  ~Pipeline();

  // One step: forward and backward of every microbatch, `b` sequences of T tokens each;
  // tokens and targets hold the microbatches back to back. Returns the sum of the
  // microbatches' mean losses where the last chunk is (else 0).
  double train(const int* tokens, const int* targets, int b, int T, StepSink& sink);
  // The forwards alone (evaluation); returns as train does.
  double evaluate(const int* tokens, const int* targets, int b, int T);

  // What train (or evaluate) runs on this stage, in order.
  std::vector<PipeAction> actions(bool evaluation) const;
  const Gpt& chunk(int c) const { return *chunks_[c]; }

  size_t peak_activation_bytes() const;
  int peak_in_flight() const { return peak_in_flight_; }

 private:
  using Acts = Gpt::Activations;
  bool first_virtual(int chunk) const { return chunk == 0 && shape_.stage == 0; }
  bool last_virtual(int chunk) const {
    return chunk == shape_.virtual_stages - 1 && shape_.stage == shape_.stages - 1;
  }
  Acts* acquire(int chunk);
  void release(int chunk, Acts* a);
  float forward(int chunk, Acts& a, const int* tokens, const int* targets, int b, int T);

  std::vector<Gpt*> chunks_;
  PipeLinks& links_;
  Shape shape_;
  StepClock& clock_;
  struct Pool {
    std::vector<std::unique_ptr<Acts>> all;
    std::vector<Acts*> free;
  };
  std::vector<Pool> pools_;  // per chunk
  std::vector<std::vector<Acts*>> live_;                        // [chunk][microbatch]
  std::vector<std::vector<strata::Request>> act_sends_;         // [chunk][microbatch]
  struct Outgoing {
    Buffer<float> buf;  // in the chunks' memory
    strata::Request req;
  };
  std::deque<Outgoing> grad_sends_;
  int in_flight_ = 0, peak_in_flight_ = 0;
};

}  // namespace strata::train
