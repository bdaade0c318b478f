// Link shaping for the emulated cluster: rates in tc's syntax, and a tbf qdisc per link
// direction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::launcher {

// A link rate in bits per second.
struct LinkRate {
  uint64_t bits_per_second = 0;
  std::string text;  // as the user wrote it, for messages
};

// Parses tc's rate syntax: a number (decimals allowed) and a unit, case-insensitive as in
// tc: bit kbit mbit gbit tbit (powers of 1000), kibit mibit gibit tibit (powers of 1024),
// bps kbps mbps gbps tbps and kibps mibps gibps tibps (BYTES per second, as in tc). A bare
// number is bits per second. Accepts 8bit (one byte per second) to 100gbit. Returns nothing
// for anything else.
std::optional<LinkRate> parse_link_rate(std::string_view text);

// The token bucket that shapes one direction of a link.
struct TbfParams {
  uint64_t rate_bits = 0;    // bits per second
  uint64_t burst_bytes = 0;  // bucket size: 4 ms at the rate, at least 16 KiB
  uint64_t limit_bytes = 0;  // queue: burst + 50 ms at the rate (at least 256 KiB)
};
TbfParams tbf_params(const LinkRate& rate);

// Replaces the root qdisc of `dev` in network namespace `netns` (a name in /run/netns)
// with tbf. Throws std::runtime_error with tc's message when tc fails.
void shape_egress(const std::string& netns, const std::string& dev, const TbfParams& p);

}  // namespace strata::launcher
