#include "table.hpp"

#include <cstdarg>
#include <cstdio>

namespace perf {

namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string format_number(double value, int width) {
  int digits = 0;  // digits of the integer part (0 below 1)
  for (double v = 1; value >= v && digits < 400; v *= 10) ++digits;
  if (digits < width - 2) return fmt("%*.2f", width, value);
  if (digits < width - 1) return fmt("%*.1f", width, value);
  if (digits < width + 1) return fmt("%*.0f", width, value);
  if (width >= 7) return fmt("%*.1e", width, value);
  return fmt("%*.0e", width, value);
}

std::vector<std::string> preamble_lines(const Preamble& p) {
  const bool factor = p.step_factor > 1;
  std::vector<std::string> v;
  v.push_back(fmt("# %s version %s backend=%s", p.tool.c_str(), p.version.c_str(), p.backend.c_str()));
  v.push_back(fmt("# Collective test starting: %s", p.collective.c_str()));
  v.push_back(fmt("# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d "
                  "iters: %d agg iters: 1 validation: %d graph: 0",
                  static_cast<unsigned long long>(p.min_bytes), static_cast<unsigned long long>(p.max_bytes),
                  static_cast<unsigned long long>(factor ? p.step_factor : p.step_bytes),
                  factor ? "factor" : "bytes", p.warmup_iters, p.iters, p.check));
  if (p.blocking) v.push_back("# Blocking Enabled: wait for completion and barrier after each collective ");
  v.push_back("#");
  v.push_back("# Using devices");
  v.push_back(fmt("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s, %d ranks", 0, 0, p.pid, p.hostname.c_str(), 0,
                  (p.device.empty() ? "[host] " + p.backend : p.device).c_str(), p.nranks));
  return v;
}

std::vector<std::string> header_lines(bool cputime) {
  const char* t = cputime ? "cputime" : "time";
  return {
      "#",
      fmt("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ", "", "",
          "", "", ""),
      fmt("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ", "size", "count", "type",
          "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong"),
      fmt("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ", "(B)", "(elements)", "", "",
          "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
  };
}

std::string row_key(const RowKey& k) {
  return fmt("%12zu  %12zu  %8s  %6s  %6i", k.bytes, k.count, k.type.c_str(), k.op.c_str(), k.root);
}

std::string row_side(const SideResult& r) {
  if (r.skipped) return fmt("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  const std::string time = format_number(r.time_us, 7);
  const std::string alg = format_number(r.algbw, 6);
  const std::string bus = format_number(r.busbw, 6);
  if (!r.checked) return fmt("  %7s  %6s  %6s  %6s", time.c_str(), alg.c_str(), bus.c_str(), "N/A");
  return fmt("  %7s  %6s  %6s  %6lld", time.c_str(), alg.c_str(), bus.c_str(), static_cast<long long>(r.wrong));
}

std::vector<std::string> footer_lines(int error_count, double avg_busbw, const std::string& collective) {
  return {
      fmt("# %-20s : %d %s", "Out of bounds values", error_count, error_count ? "FAILED" : "OK"),
      fmt("# %-20s : %g ", "Avg bus bandwidth", avg_busbw),
      "#",
      fmt("# Collective test concluded: %s", collective.c_str()),
  };
}

}  // namespace perf
