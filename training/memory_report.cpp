// Trainer::memory_report: what this rank allocated for model states, next to the ZeRO
// paper's per-rank formulas in fp32 (parameters 4Ψ, gradients 4Ψ, Adam moments 8Ψ; ZeRO-1
// divides the moments by Nd, ZeRO-2 the gradients too, ZeRO-3 the parameters too), and
// for activations (with --recompute block, each block's input and one block's worth).
#include <cstdio>
#include <string>

#include "trainer.hpp"

namespace strata::train {

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MB", bytes / 1e6);
  return b;
}

namespace {

// Display width of UTF-8 text (Ψ is two bytes, one column).
size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string pad(std::string s, size_t w) {
  size_t n = width(s);
  return n >= w ? s : s + std::string(w - n, ' ');
}

std::string lpad(std::string s, size_t w) {
  size_t n = width(s);
  return n >= w ? s : std::string(w - n, ' ') + s;
}

}  // namespace

std::string Trainer::memory_report() const {
  const double psi = static_cast<double>(layout_.num_params());
  const int nd = groups_.size(kDp), z = o_.zero;
  const double gathered = sharded_ ? static_cast<double>(sharded_->buffer_bytes()) : 0;
  const double params = params_.size() * sizeof(float) + gathered;
  const double grads = sync_.grad_bytes();
  const double moments = opt_.state_bytes();
  const double f_params = z == 3 ? 4 * psi / nd : 4 * psi;
  const double f_grads = z >= 2 ? 4 * psi / nd : 4 * psi;
  const double f_moments = z == 0 ? 8 * psi : 8 * psi / nd;
  const char* total_formula[] = {"16Ψ", "(8+8/Nd)Ψ", "(4+12/Nd)Ψ", "16Ψ/Nd"};
  std::string held = std::to_string(layout_.num_params()) + " parameters";
  if (groups_.model_parallel())
    held += " on this rank, of " + std::to_string(layout_.model_params()) + " in the model";
  std::string out = "memory per rank, fp32 (Ψ = " + held + ", Nd = " + std::to_string(nd) +
                    ", zero " + std::to_string(z) + "):  allocated | ZeRO formula\n";
  auto row = [&](const std::string& what, double bytes, const std::string& formula, double f,
                 const std::string& note) {
    out += "  " + pad(what, 22) + lpad(mb(bytes), 10) + " | ";
    if (!formula.empty()) out += pad(formula, 10) + " = " + lpad(mb(f), 10);
    out += note + "\n";
  };
  std::string buffers;
  if (sharded_)
    buffers = " + gathered " + mb(gathered) + " (" + std::to_string(sharded_->buffers()) +
              " layer groups' buffers: in use and prefetched, --prefetch " + std::to_string(o_.prefetch) + ")";
  row("parameters", params, z == 3 ? "4Ψ/Nd" : "4Ψ", f_params, buffers);
  std::string staging;
  if (z >= 2)
    staging = " + staging " + std::to_string(sync_.staging_peak()) + " x " +
              mb(layout_.max_bucket() * 4.0) + " (buckets in flight)";
  row("gradients", grads, z >= 2 ? "4Ψ/Nd" : "4Ψ", f_grads, staging);
  row("Adam moments m, v", moments, z == 0 ? "8Ψ" : "8Ψ/Nd", f_moments, "");
  row("master weights", 0, "", 0, "none: the fp32 parameters are the master copy");
  row("model states", params + grads + moments, total_formula[z], f_params + f_grads + f_moments, "");
  size_t acts = 0, redo = 0;
  for (const auto& c : chunks_) acts += c->activation_bytes(), redo += c->recompute_bytes();
  row("activations", static_cast<double>(acts), "", 0,
      "per microbatch in flight: " + std::to_string(micro_batch_) + " x ctx " +
          std::to_string(o_.model.ctx) + (o_.pp > 1 ? ", in every chunk of this stage" : "") +
          (o_.recompute ? ", each block's input only (--recompute block)" : "") + " (not sharded by ZeRO)");
  if (o_.recompute)
    row("recomputation", static_cast<double>(redo), "", 0, "one block's activations, computed again in backward");
  return out;
}

}  // namespace strata::train
