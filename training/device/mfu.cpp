#include "device/mfu.hpp"

#include <cstdio>
#include <strata/device.hpp>

namespace strata::train {

double flops_per_token(const ModelConfig& m) {
  const double L = m.layers, C = m.dim, T = m.ctx, V = m.vocab;
  return 72 * L * C * C + 12 * L * T * C + 6 * C * V;
}

namespace {

struct Card {
  const char* match;  // a part of CUDA's device name; the more specific names first
  double fp32, bf16;  // dense TFLOPS
  const char* source;
};

// NVIDIA's datasheets give bf16 tensor-core figures "with sparsity"; dense is half.
constexpr Card kCards[] = {
    {"H100 PCIe", 51, 756, "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe)"},
    {"H100 NVL", 60, 835, "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL)"},
    {"H200 NVL", 60, 835, "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL)"},
    {"H100", 67, 989, "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"},
    {"H200", 67, 989, "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)"},
    {"A100", 19.5, 312, "NVIDIA A100 Tensor Core GPU datasheet"},
};

}  // namespace

std::optional<PeakFlops> peak_flops(const std::string& device_name, bool bf16) {
  for (const Card& c : kCards)
    if (device_name.find(c.match) != std::string::npos) return PeakFlops{c.match, bf16 ? c.bf16 : c.fp32, c.source};
  return std::nullopt;
}

DeviceReport::DeviceReport(const Options& o) : flops_per_token_(flops_per_token(o.model)) {
  if (o.device == "host") return;
  const std::string card = strata::device::device_name();
  banner_ = "device " + o.device + " (" + card + "), " + o.precision;
  if (o.device == "cuda") {
    peak_ = peak_flops(card, o.precision == "bf16");
    char b[256];
    if (peak_)
      std::snprintf(b, sizeof b, " | MFU against %g TFLOPS (%s, %s dense: %s), %.3g GFLOP per token", peak_->tflops,
                    peak_->card, o.precision == "bf16" ? "bf16 tensor cores" : "fp32", peak_->source,
                    flops_per_token_ / 1e9);
    else
      std::snprintf(b, sizeof b, " | no MFU: this card's peak is not in training/device/mfu.cpp's table");
    banner_ += b;
  }
  banner_ += "\n";
}

std::string DeviceReport::step(double tokens_per_s) const {
  if (!peak_) return "";
  char b[32];
  std::snprintf(b, sizeof b, " | MFU %.1f%%", 100 * tokens_per_s * flops_per_token_ / (peak_->tflops * 1e12));
  return b;
}

}  // namespace strata::train
