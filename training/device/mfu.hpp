// Model FLOPs utilisation on a GPU: the model's FLOPs per trained token from its shape,
// and the card's peak from a table whose source is named.
#pragma once

#include <optional>
#include <string>

#include "layout.hpp"
#include "options.hpp"

namespace strata::train {

// FLOPs of one token's forward and backward (3x the forward's matrix products, PaLM's
// count): per layer 24 C^2 (qkv, attention projection, MLP) and 4 T C (scores and their
// weighted sum, the whole T x T square as computed), and 2 C V for the tied head:
// 72 L C^2 + 12 L T C + 6 C V.
double flops_per_token(const ModelConfig& m);

struct PeakFlops {
  const char* card;    // what the device name matched
  double tflops;       // dense, for the precision asked
  const char* source;  // where the figure is from
};
// The peak of the GPU named `device_name` (as CUDA names it) for fp32 (CUDA cores: the
// products run without TF32) or bf16 (dense tensor cores); none for a card not in the
// table.
std::optional<PeakFlops> peak_flops(const std::string& device_name, bool bf16);

// What the log says about the device: a line for the start (nothing on the host), and
// each step's MFU where the card's peak is known (on CUDA).
class DeviceReport {
 public:
  explicit DeviceReport(const Options& o);
  const std::string& banner() const { return banner_; }
  // " | MFU 41.2%", or "".
  std::string step(double tokens_per_s) const;

 private:
  std::string banner_;
  double flops_per_token_ = 0;
  std::optional<PeakFlops> peak_;
};

}  // namespace strata::train
