#include "transports/ibverbs/ib_wire.hpp"

#include <cstring>

#include "strata/error.hpp"

namespace strata::ibverbs {

namespace {

struct Writer {
  std::vector<char>& out;
  void u8(uint8_t v) { out.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { for (int i = 0; i < 2; ++i) u8(static_cast<uint8_t>(v >> (8 * i))); }
  void u32(uint32_t v) { for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i))); }
  void u64(uint64_t v) { for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i))); }
  void bytes(const void* p, size_t n) { out.insert(out.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); }
  void pad(size_t n) { out.insert(out.end(), n, 0); }
};

struct Reader {
  const unsigned char* p;
  uint8_t u8() { return *p++; }
  uint16_t u16() { uint16_t v = 0; for (int i = 0; i < 2; ++i) v |= static_cast<uint16_t>(u8()) << (8 * i); return v; }
  uint32_t u32() { uint32_t v = 0; for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i); return v; }
  uint64_t u64() { uint64_t v = 0; for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i); return v; }
  void bytes(void* d, size_t n) { std::memcpy(d, p, n); p += n; }
  void pad(size_t n) { p += n; }
  // For qp_fields: the same calls as Writer's, storing what they read.
  void u8(uint8_t& v) { v = u8(); }
  void u16(uint16_t& v) { v = u16(); }
  void u32(uint32_t& v) { v = u32(); }
  void u64(uint64_t& v) { v = u64(); }
};

// A queue pair's fields in wire order, written once for both directions: `io` is a Writer
// (Qp = const QpInfo) or a Reader (Qp = QpInfo). The device name follows (kDeviceBytes).
template <class Io, class Qp>
void qp_fields(Io& io, Qp& q) {
  io.u32(q.qpn);
  io.u32(q.psn);
  io.u16(q.lid);
  io.u8(q.port);
  io.u8(q.link_layer);
  io.u8(q.mtu);
  io.u8(q.gid_index);
  io.pad(2);
  io.bytes(q.gid, 16);
  io.u64(q.ring_addr);
  io.u32(q.ring_rkey);
  io.u32(q.nslots);
  io.u32(q.slot_bytes);
  io.u32(q.credit_rkey);
  io.u64(q.credit_addr);
}

constexpr size_t kDeviceBytes = 32;

}  // namespace

uint32_t fnv1a32(const unsigned char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

std::vector<char> encode(const ConnInfo& info) {
  if (info.qps.empty() || info.qps.size() > kMaxQps) throw InternalError("ibverbs: connection info with " + std::to_string(info.qps.size()) + " queue pairs");
  std::vector<char> out;
  Writer w{out};
  w.u32(kWireMagic);
  w.u16(kWireVersion);
  w.u16(static_cast<uint16_t>(info.qps.size()));
  w.u32(static_cast<uint32_t>(info.qps.size() * kWireQpBytes));
  for (const QpInfo& q : info.qps) {
    qp_fields(w, q);
    char name[kDeviceBytes] = {};
    std::strncpy(name, q.device.c_str(), kDeviceBytes - 1);
    w.bytes(name, kDeviceBytes);
  }
  w.u32(fnv1a32(reinterpret_cast<const unsigned char*>(out.data()), out.size()));
  return out;
}

ConnInfo decode(const char* data, size_t bytes, const std::string& from) {
  auto bad = [&](const std::string& why) {
    return SystemError("malformed ibverbs connection info from " + from + ": " + why);
  };
  if (bytes < kWireHeaderBytes + 4) throw bad("truncated (" + std::to_string(bytes) + " bytes)");
  Reader r{reinterpret_cast<const unsigned char*>(data)};
  uint32_t magic = r.u32();
  if (magic != kWireMagic) throw bad("not Strata's (bad magic)");
  uint16_t version = r.u16();
  if (version != kWireVersion)
    throw bad("version " + std::to_string(version) + ", this build speaks version " + std::to_string(kWireVersion) +
              " (mixed Strata versions?)");
  uint16_t nqps = r.u16();
  uint32_t body = r.u32();
  if (nqps == 0 || nqps > kMaxQps) throw bad(std::to_string(nqps) + " queue pairs (1 to " + std::to_string(kMaxQps) + " allowed)");
  if (body != nqps * kWireQpBytes) throw bad("body of " + std::to_string(body) + " bytes for " + std::to_string(nqps) + " queue pairs");
  if (bytes != kWireHeaderBytes + body + 4)
    throw bad(std::string(bytes < kWireHeaderBytes + body + 4 ? "truncated" : "trailing bytes") + " (" +
              std::to_string(bytes) + " bytes, expected " + std::to_string(kWireHeaderBytes + body + 4) + ")");
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(data + bytes - 4);
  uint32_t sum = static_cast<uint32_t>(tail[0]) | static_cast<uint32_t>(tail[1]) << 8 | static_cast<uint32_t>(tail[2]) << 16 |
        static_cast<uint32_t>(tail[3]) << 24;
  if (sum != fnv1a32(reinterpret_cast<const unsigned char*>(data), bytes - 4)) throw bad("checksum mismatch");
  ConnInfo info;
  for (uint16_t i = 0; i < nqps; ++i) {
    QpInfo q;
    qp_fields(r, q);
    char name[kDeviceBytes];
    r.bytes(name, kDeviceBytes);
    std::string at = "queue pair " + std::to_string(i) + ": ";
    if (name[kDeviceBytes - 1] != '\0') throw bad(at + "device name not terminated");
    q.device = name;
    if (q.qpn == 0 || q.qpn >= (1u << 24)) throw bad(at + "QPN " + std::to_string(q.qpn) + " out of range");
    if (q.psn >= (1u << 24)) throw bad(at + "PSN " + std::to_string(q.psn) + " out of range");
    if (q.port == 0) throw bad(at + "port 0");
    if (q.link_layer != kLinkIb && q.link_layer != kLinkEthernet) throw bad(at + "unknown link layer " + std::to_string(q.link_layer));
    if (q.mtu < 1 || q.mtu > 5) throw bad(at + "MTU code " + std::to_string(q.mtu) + " out of range");
    if (q.link_layer == kLinkIb && q.lid == 0) throw bad(at + "InfiniBand port without a LID");
    if (q.nslots == 0 || q.nslots > 4096) throw bad(at + std::to_string(q.nslots) + " ring slots (1 to 4096 allowed)");
    if (q.slot_bytes < 4096 || q.slot_bytes % 64 != 0) throw bad(at + "slot size " + std::to_string(q.slot_bytes));
    if (q.ring_addr == 0 || q.credit_addr == 0) throw bad(at + "null ring or credit address");
    info.qps.push_back(q);
  }
  return info;
}

}  // namespace strata::ibverbs
