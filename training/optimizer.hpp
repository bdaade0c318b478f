// AdamW over the segments of the parameter buffer that this rank updates, the learning
// rate schedule, and gradient clipping by global norm.
#pragma once

#include <cstddef>
#include <vector>

#include "device/buffer.hpp"
#include "kernels.hpp"
#include "layout.hpp"

namespace strata::train {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;  // GPT-style; 0.999 reacts too slowly for short runs
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// Linear warmup from lr/warmup to lr over `warmup` steps, then a cosine down to
// min_frac * lr at step `total`. Steps count from 1.
struct LrSchedule {
  float lr = 1e-3f;
  int warmup = 100;
  int total = 1000;
  float min_frac = 0.1f;
  float at(int step) const;
};

// Multiplier for the gradient so that its global norm is at most `clip` (clip <= 0: off).
float clip_scale(double norm, float clip);

// Moments for the parameters this rank updates (all of them, or its ZeRO shard).
class AdamW {
 public:
  // The moments live in k's memory.
  AdamW(const AdamWConfig& cfg, size_t state_size, const Kernels& k) : cfg_(cfg), m_(k, state_size), v_(k, state_size) {}

  // One step: t counts from 1. Segments say where params, grads and moments are.
  void step(const Kernels& k, const std::vector<Segment>& segs, float* params, const float* grads,
            int t, float lr, float grad_scale);

  Buffer<float>& m() { return m_; }
  Buffer<float>& v() { return v_; }
  const Buffer<float>& m() const { return m_; }
  const Buffer<float>& v() const { return v_; }
  size_t state_bytes() const { return m_.bytes() + v_.bytes(); }

 private:
  AdamWConfig cfg_;
  Buffer<float> m_, v_;
};

}  // namespace strata::train
