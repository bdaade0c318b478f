#include "tc.hpp"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "command.hpp"

namespace strata::launcher {
namespace {

// tc's own table (iproute2 tc/tc_util.c), matched without regard to case as tc does; so
// "mbps" is megaBYTES per second, exactly as `tc ... rate 10mbps` would read it.
struct RateUnit {
  const char* name;
  double bits;
};
constexpr RateUnit kRateUnits[] = {
    {"bit", 1.},
    {"kibit", 1024.},
    {"kbit", 1000.},
    {"mibit", 1024. * 1024.},
    {"mbit", 1000000.},
    {"gibit", 1024. * 1024. * 1024.},
    {"gbit", 1000000000.},
    {"tibit", 1024. * 1024. * 1024. * 1024.},
    {"tbit", 1000000000000.},
    {"bps", 8.},
    {"kibps", 8. * 1024.},
    {"kbps", 8000.},
    {"mibps", 8. * 1024. * 1024.},
    {"mbps", 8000000.},
    {"gibps", 8. * 1024. * 1024. * 1024.},
    {"gbps", 8000000000.},
    {"tibps", 8. * 1024. * 1024. * 1024. * 1024.},
    {"tbps", 8000000000000.},
};

constexpr double kMinRateBits = 8;       // one byte per second
constexpr double kMaxRateBits = 1e11;    // 100gbit; an unshaped veth does far less
constexpr uint64_t kMinBurst = 16 * 1024;  // comfortably above one 1500-byte frame
constexpr double kBurstSeconds = 0.004;    // rate/HZ at HZ=250
constexpr double kQueueSeconds = 0.050;
constexpr uint64_t kMinQueue = 256 * 1024;  // a few 64 KiB TSO packets at low rates

}  // namespace

std::optional<LinkRate> parse_link_rate(std::string_view text) {
  std::string s(text);
  // Plain decimal numbers only: strtod alone would also take "inf", "nan", hex and signs.
  size_t digits = 0;
  bool dot = false;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) ||
                               (s[digits] == '.' && !dot))) {
    dot = dot || s[digits] == '.';
    ++digits;
  }
  if (digits == 0 || (digits == 1 && dot)) return std::nullopt;
  double value = std::strtod(s.substr(0, digits).c_str(), nullptr);
  std::string unit = s.substr(digits);
  double scale = 0;
  if (unit.empty()) {
    scale = 1;  // tc: a bare number is bits per second
  } else {
    for (const auto& u : kRateUnits)
      if (::strcasecmp(u.name, unit.c_str()) == 0) scale = u.bits;
  }
  if (scale == 0) return std::nullopt;
  double bits = value * scale;
  if (!std::isfinite(bits) || bits < kMinRateBits || bits > kMaxRateBits) return std::nullopt;
  return LinkRate{static_cast<uint64_t>(std::llround(bits)), s};
}

TbfParams tbf_params(const LinkRate& rate) {
  TbfParams p;
  p.rate_bits = rate.bits_per_second;
  double bytes_per_second = static_cast<double>(rate.bits_per_second) / 8;
  p.burst_bytes = std::max(kMinBurst, static_cast<uint64_t>(bytes_per_second * kBurstSeconds));
  p.limit_bytes =
      p.burst_bytes + std::max(kMinQueue, static_cast<uint64_t>(bytes_per_second * kQueueSeconds));
  return p;
}

void shape_egress(const std::string& netns, const std::string& dev, const TbfParams& p) {
  run_checked({"tc", "-n", netns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
               std::to_string(p.rate_bits) + "bit", "burst", std::to_string(p.burst_bytes),
               "limit", std::to_string(p.limit_bytes)});
}

}  // namespace strata::launcher
