#include "optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace strata::train {

float LrSchedule::at(int step) const {
  if (warmup > 0 && step <= warmup) return lr * static_cast<float>(step) / warmup;
  const float min_lr = lr * min_frac;
  if (step >= total) return min_lr;
  double progress = static_cast<double>(step - warmup) / std::max(1, total - warmup);
  double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return static_cast<float>(min_lr + (lr - min_lr) * cosine);
}

float clip_scale(double norm, float clip) {
  if (clip <= 0 || !(norm > clip)) return 1.0f;
  return static_cast<float>(clip / norm);
}

void AdamW::step(const Kernels& k, const std::vector<Segment>& segs, float* params,
                 const float* grads, int t, float lr, float grad_scale) {
  const float bc1 = 1.0f - std::pow(cfg_.beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(cfg_.beta2, static_cast<float>(t));
  for (const Segment& s : segs) {
    k.adamw(params + s.param, grads + s.grad, m_.data() + s.state, v_.data() + s.state, s.len, lr,
            cfg_.beta1, cfg_.beta2, cfg_.eps, s.decay ? cfg_.weight_decay : 0.0f, bc1, bc2,
            grad_scale);
  }
}

}  // namespace strata::train
