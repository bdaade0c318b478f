// Pure helpers of the UCX transport (no UCX needed): what one rank sends a peer to connect,
// and the small messages of the one-sided (RMA) path.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace strata::ucx {

// The worker address, and where the peer may put its data into this rank: the address of
// the staging region this rank set aside for that peer, its packed remote key (empty when
// this rank takes no puts) and its shape, which the peer must share (a sender that cut
// larger slots, or more, would write past the region).
struct ConnInfo {
  std::vector<char> address;
  uint64_t region = 0;
  uint64_t slot_bytes = 0;
  uint32_t slots = 0;
  std::vector<char> rkey;
  bool takes_puts() const { return !rkey.empty(); }
};

// Wire format: "SUX1", u32 address length, address, u64 region, u64 slot bytes, u32 slots,
// u32 rkey length, rkey (host byte order: both ends are Strata processes of one job, on one
// kind of machine).
inline std::vector<char> encode(const ConnInfo& c) {
  std::vector<char> out;
  auto put = [&](const void* p, size_t n) {
    const char* b = static_cast<const char*>(p);
    out.insert(out.end(), b, b + n);
  };
  uint32_t alen = static_cast<uint32_t>(c.address.size()), rlen = static_cast<uint32_t>(c.rkey.size());
  put("SUX1", 4);
  put(&alen, 4);
  put(c.address.data(), alen);
  put(&c.region, 8);
  put(&c.slot_bytes, 8);
  put(&c.slots, 4);
  put(&rlen, 4);
  put(c.rkey.data(), rlen);
  return out;
}

// Nothing when `in` is not exactly one encoded ConnInfo with a non-empty address.
inline std::optional<ConnInfo> decode(const std::vector<char>& in) {
  size_t at = 0;
  auto take = [&](void* p, size_t n) {
    if (in.size() - at < n) return false;
    std::memcpy(p, in.data() + at, n);
    at += n;
    return true;
  };
  auto take_bytes = [&](std::vector<char>& v) {
    uint32_t len = 0;
    if (!take(&len, 4) || in.size() - at < len) return false;
    v.assign(in.begin() + static_cast<std::ptrdiff_t>(at), in.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
    return true;
  };
  char magic[4];
  ConnInfo c;
  if (!take(magic, 4) || std::memcmp(magic, "SUX1", 4) != 0) return std::nullopt;
  if (!take_bytes(c.address) || c.address.empty() || !take(&c.region, 8) || !take(&c.slot_bytes, 8) ||
      !take(&c.slots, 4) || !take_bytes(c.rkey) || at != in.size())
    return std::nullopt;
  return c;
}

// A put's notice (sender to receiver, with the tag of the message it stands for): which
// staging slot holds the data and how many bytes it is. The receiver hands the slot back
// with a credit carrying the slot number alone.
struct PutNotice {
  uint64_t slot;
  uint64_t bytes;
};

}  // namespace strata::ucx
