// ibverbs connection info: round trip, and refusal of malformed, truncated, corrupted or
// wrong-version input.
#include <gtest/gtest.h>

#include <cstring>

#include "strata/error.hpp"
#include "transports/ibverbs/ib_wire.hpp"

using namespace strata::ibverbs;

namespace {

ConnInfo sample(int nqps) {
  ConnInfo c;
  for (int i = 0; i < nqps; ++i) {
    QpInfo q;
    q.qpn = 0x1234 + i;
    q.psn = 0xabcdef - i;
    q.lid = static_cast<uint16_t>(7 + i);
    q.port = static_cast<uint8_t>(1 + i % 2);
    q.link_layer = i % 2 ? kLinkEthernet : kLinkIb;
    q.mtu = 5;
    q.gid_index = static_cast<uint8_t>(3 * i);
    for (int k = 0; k < 16; ++k) q.gid[k] = static_cast<uint8_t>(k * 17 + i);
    q.ring_addr = 0x7f0000001000ull + i * 0x100000;
    q.ring_rkey = 0xdeadbeef - i;
    q.nslots = 8;
    q.slot_bytes = 512 << 10;
    q.credit_rkey = 0x11223344 + i;
    q.credit_addr = 0x7f0000901000ull + i * 64;
    q.device = "mlx5_" + std::to_string(i);
    c.qps.push_back(q);
  }
  return c;
}

void expect_equal(const QpInfo& a, const QpInfo& b) {
  EXPECT_EQ(a.qpn, b.qpn);
  EXPECT_EQ(a.psn, b.psn);
  EXPECT_EQ(a.lid, b.lid);
  EXPECT_EQ(a.port, b.port);
  EXPECT_EQ(a.link_layer, b.link_layer);
  EXPECT_EQ(a.mtu, b.mtu);
  EXPECT_EQ(a.gid_index, b.gid_index);
  EXPECT_EQ(0, std::memcmp(a.gid, b.gid, 16));
  EXPECT_EQ(a.ring_addr, b.ring_addr);
  EXPECT_EQ(a.ring_rkey, b.ring_rkey);
  EXPECT_EQ(a.nslots, b.nslots);
  EXPECT_EQ(a.slot_bytes, b.slot_bytes);
  EXPECT_EQ(a.credit_rkey, b.credit_rkey);
  EXPECT_EQ(a.credit_addr, b.credit_addr);
  EXPECT_EQ(a.device, b.device);
}

std::string refusal(const std::vector<char>& blob) {
  try {
    decode(blob.data(), blob.size(), "rank 3");
  } catch (const strata::SystemError& e) {
    return e.what();
  }
  return "";
}

// Re-seals a modified blob with a valid checksum, so the field checks are what refuses it.
void reseal(std::vector<char>& b) {
  uint32_t h = fnv1a32(reinterpret_cast<const unsigned char*>(b.data()), b.size() - 4);
  for (int i = 0; i < 4; ++i) b[b.size() - 4 + i] = static_cast<char>(h >> (8 * i));
}

}  // namespace

TEST(IbWire, RoundTrip) {
  for (int n : {1, 2, 4, 16}) {
    ConnInfo c = sample(n);
    std::vector<char> b = encode(c);
    EXPECT_EQ(b.size(), kWireHeaderBytes + n * kWireQpBytes + 4);
    ConnInfo d = decode(b.data(), b.size(), "rank 3");
    ASSERT_EQ(d.qps.size(), c.qps.size());
    for (int i = 0; i < n; ++i) expect_equal(c.qps[i], d.qps[i]);
  }
}

TEST(IbWire, LayoutIsLittleEndianAndVersioned) {
  std::vector<char> b = encode(sample(1));
  EXPECT_EQ(std::string(b.data(), 4), "SIBV");
  EXPECT_EQ(static_cast<uint8_t>(b[4]), kWireVersion);
  EXPECT_EQ(static_cast<uint8_t>(b[5]), 0);
  EXPECT_EQ(static_cast<uint8_t>(b[6]), 1);  // nqps
  EXPECT_EQ(static_cast<uint8_t>(b[12]), 0x34);  // qpn, low byte first
}

TEST(IbWire, TruncatedIsRefused) {
  std::vector<char> b = encode(sample(2));
  for (size_t len : {size_t(0), size_t(3), kWireHeaderBytes, kWireHeaderBytes + 4, b.size() - 1, b.size() - kWireQpBytes}) {
    std::vector<char> t(b.begin(), b.begin() + static_cast<long>(len));
    std::string why = refusal(t);
    EXPECT_NE(why.find("truncated"), std::string::npos) << len << ": " << why;
    EXPECT_NE(why.find("rank 3"), std::string::npos) << why;
  }
  std::vector<char> longer = b;
  longer.push_back(0);
  EXPECT_NE(refusal(longer).find("trailing"), std::string::npos);
}

TEST(IbWire, WrongMagicOrVersionIsRefused) {
  std::vector<char> b = encode(sample(1));
  b[0] = 'X';
  EXPECT_NE(refusal(b).find("magic"), std::string::npos);
  b = encode(sample(1));
  b[4] = 2;  // version 2
  reseal(b);
  std::string why = refusal(b);
  EXPECT_NE(why.find("version 2"), std::string::npos) << why;
}

TEST(IbWire, CorruptionIsRefusedByTheChecksum) {
  std::vector<char> b = encode(sample(2));
  for (size_t i = kWireHeaderBytes; i < b.size() - 4; i += 37) {
    std::vector<char> c = b;
    c[i] ^= 0x40;
    EXPECT_NE(refusal(c).find("checksum"), std::string::npos) << "byte " << i;
  }
}

TEST(IbWire, OutOfRangeFieldsAreRefused) {
  auto with = [](auto change) {
    ConnInfo c = sample(1);
    change(c.qps[0]);
    return refusal(encode(c));
  };
  EXPECT_NE(with([](QpInfo& q) { q.qpn = 0; }).find("QPN"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.qpn = 1u << 24; }).find("QPN"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.psn = 1u << 24; }).find("PSN"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.mtu = 6; }).find("MTU"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.link_layer = 3; }).find("link layer"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.lid = 0; }).find("LID"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.nslots = 0; }).find("slots"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.slot_bytes = 1000; }).find("slot size"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.ring_addr = 0; }).find("null"), std::string::npos);
  EXPECT_NE(with([](QpInfo& q) { q.port = 0; }).find("port"), std::string::npos);
  // RoCE needs no LID.
  EXPECT_EQ(with([](QpInfo& q) { q.link_layer = kLinkEthernet; q.lid = 0; }), "");
}

TEST(IbWire, QueuePairCountIsChecked) {
  std::vector<char> b = encode(sample(1));
  b[6] = 0;  // nqps = 0
  reseal(b);
  EXPECT_NE(refusal(b).find("queue pairs"), std::string::npos);
  b = encode(sample(1));
  b[6] = 2;  // claims 2, carries 1
  reseal(b);
  EXPECT_NE(refusal(b).find("body"), std::string::npos);
  EXPECT_THROW(encode(ConnInfo{}), strata::InternalError);
}
