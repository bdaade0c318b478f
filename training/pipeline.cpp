#include "pipeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata::train {

namespace {
int peer(const Group& link) { return 1 - link.rank(); }  // a link is two ranks
}  // namespace

Pipeline::Pipeline(std::vector<Gpt*> chunks, PipeLinks& links, const Shape& shape, StepClock& clock)
    : chunks_(std::move(chunks)), links_(links), shape_(shape), clock_(clock) {
  if (static_cast<int>(chunks_.size()) != shape.virtual_stages)
    throw std::invalid_argument("pipeline: one chunk per virtual stage");
  pools_.resize(chunks_.size());
  live_.assign(chunks_.size(), std::vector<Acts*>(shape.microbatches, nullptr));
  act_sends_.assign(chunks_.size(), std::vector<strata::Request>(shape.microbatches));
}

Pipeline::~Pipeline() {
  // Sends still in flight read from our buffers; a failed one has been reported already.
  for (auto& chunk : act_sends_)
    for (auto& r : chunk) {
      try {
        r.wait();
      } catch (const std::exception&) {
      }
    }
  for (Outgoing& o : grad_sends_) {
    try {
      o.req.wait();
    } catch (const std::exception&) {
    }
  }
}

Pipeline::Acts* Pipeline::acquire(int chunk) {
  Pool& p = pools_[chunk];
  if (p.free.empty()) {
    p.all.push_back(chunks_[chunk]->make_activations());
    p.free.push_back(p.all.back().get());
  }
  Acts* a = p.free.back();
  p.free.pop_back();
  peak_in_flight_ = std::max(peak_in_flight_, ++in_flight_);
  return a;
}

void Pipeline::release(int chunk, Acts* a) {
  pools_[chunk].free.push_back(a);
  --in_flight_;
}

size_t Pipeline::peak_activation_bytes() const {
  size_t n = 0;
  for (const Pool& p : pools_)
    for (const auto& a : p.all) n += a->bytes();
  for (const Gpt* c : chunks_) n += c->recompute_bytes();  // shared by the microbatches
  return n;
}

float Pipeline::forward(int chunk, Acts& a, const int* tokens, const int* targets, int b, int T) {
  const size_t n = a.row_floats(b, T);
  if (!first_virtual(chunk))
    clock_.idle([&] { links_.act_in.recv(a.input(), n, peer(links_.act_in)).wait(); });
  const float loss = chunks_[chunk]->forward(a, tokens, targets, b, T);
  return last_virtual(chunk) ? loss : 0.0f;
}

std::vector<PipeAction> Pipeline::actions(bool evaluation) const {
  const Shape& s = shape_;
  return pipeline_schedule(s.schedule, s.stages, s.virtual_stages, s.microbatches, s.stage, evaluation);
}

double Pipeline::train(const int* tokens, const int* targets, int b, int T, StepSink& sink) {
  const Shape& s = shape_;
  const std::vector<PipeAction> plan = actions(false);
  // From its last backward of the step on, a chunk's gradients stop accumulating.
  std::vector<size_t> last(chunks_.size(), 0);
  for (size_t i = 0; i < plan.size(); ++i)
    if (!plan[i].forward) last[plan[i].chunk] = i;
  const size_t per_mb = static_cast<size_t>(b) * T;
  double loss = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PipeAction& x = plan[i];
    const int* tk = tokens + x.microbatch * per_mb;
    const int* tg = targets + x.microbatch * per_mb;
    Acts*& a = live_[x.chunk][x.microbatch];
    if (x.forward) {
      a = acquire(x.chunk);
      loss += forward(x.chunk, *a, tk, tg, b, T);
      if (!last_virtual(x.chunk))
        act_sends_[x.chunk][x.microbatch] =
            links_.act_out.send(a->output(), a->row_floats(b, T), peer(links_.act_out));
      continue;
    }
    const size_t rows = a->row_floats(b, T);
    if (!last_virtual(x.chunk))
      clock_.idle([&] { links_.grad_in.recv(a->grad(), rows, peer(links_.grad_in)).wait(); });
    // The output went out long ago (its gradient has come back); make sure before reuse.
    clock_.comm([&] { act_sends_[x.chunk][x.microbatch].wait(); });
    sink.last_backward(i == last[x.chunk]);
    chunks_[x.chunk]->backward(*a, sink, s.loss_scale > 0 ? s.loss_scale : 1.0f / s.microbatches);
    if (!first_virtual(x.chunk)) {
      // The activations go back to the pool now, so the gradient leaves from a buffer of
      // its own (reused once its send has completed).
      if (grad_sends_.empty() || !grad_sends_.front().req.test()) grad_sends_.emplace_back();
      else grad_sends_.push_back(std::move(grad_sends_.front())), grad_sends_.pop_front();
      Outgoing& out = grad_sends_.back();
      const Kernels& k = chunks_[x.chunk]->kernels();
      if (out.buf.size() < rows) out.buf = Buffer<float>(k, rows);
      k.copy(out.buf.data(), a->grad(), rows * sizeof(float));
      out.req = links_.grad_out.send(out.buf.data(), rows, peer(links_.grad_out));
    }
    release(x.chunk, a);
    a = nullptr;
  }
  sink.backward_done();
  return loss;
}

double Pipeline::evaluate(const int* tokens, const int* targets, int b, int T) {
  const std::vector<PipeAction> plan = actions(true);
  const size_t per_mb = static_cast<size_t>(b) * T;
  double loss = 0;
  for (const PipeAction& x : plan) {
    Acts* a = acquire(x.chunk);
    loss += forward(x.chunk, *a, tokens + x.microbatch * per_mb, targets + x.microbatch * per_mb, b, T);
    if (!last_virtual(x.chunk)) {
      strata::Request r = links_.act_out.send(a->output(), a->row_floats(b, T), peer(links_.act_out));
      clock_.idle([&] { r.wait(); });  // the slot is reused next
    }
    release(x.chunk, a);
  }
  return loss;
}

}  // namespace strata::train
