// UCX connection info: round trip with and without a put region, and refusal of anything
// that is not exactly one encoded record.
#include <gtest/gtest.h>

#include "transports/ucx/ucx_conn_info.hpp"

using namespace strata::ucx;

namespace {

ConnInfo sample(bool puts) {
  ConnInfo c;
  for (int i = 0; i < 77; ++i) c.address.push_back(static_cast<char>(i * 7 + 1));
  if (puts) {
    c.region = 0x7f12345678c0ull;
    c.slot_bytes = 256 << 10;
    c.slots = 4;
    for (int i = 0; i < 19; ++i) c.rkey.push_back(static_cast<char>(0xf0 - i));
  }
  return c;
}

}  // namespace

TEST(UcxConnInfo, RoundTrips) {
  for (bool puts : {false, true}) {
    ConnInfo c = sample(puts);
    std::optional<ConnInfo> d = decode(encode(c));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->address, c.address);
    EXPECT_EQ(d->region, c.region);
    EXPECT_EQ(d->slot_bytes, c.slot_bytes);
    EXPECT_EQ(d->slots, c.slots);
    EXPECT_EQ(d->rkey, c.rkey);
    EXPECT_EQ(d->takes_puts(), puts);
  }
}

TEST(UcxConnInfo, RefusesMalformedInput) {
  std::vector<char> good = encode(sample(true));
  // Every truncation, and one byte too many.
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(decode(std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))).has_value()) << n;
  std::vector<char> longer = good;
  longer.push_back(0);
  EXPECT_FALSE(decode(longer).has_value());
  // Another magic (e.g. a bare worker address from an older Strata).
  std::vector<char> magic = good;
  magic[3] = '2';
  EXPECT_FALSE(decode(magic).has_value());
  // A length that runs past the end.
  std::vector<char> len = good;
  len[4] = static_cast<char>(0xff);
  EXPECT_FALSE(decode(len).has_value());
  // No worker address.
  ConnInfo empty = sample(true);
  empty.address.clear();
  EXPECT_FALSE(decode(encode(empty)).has_value());
}
