// Connection info of an ibverbs link, as exchanged over the control socket: for each queue
// pair (one per NIC port, striped) what the peer needs to connect to it (QPN, PSN, LID/GID,
// MTU) and to write into it (its receive ring and credit word: address, rkey, geometry).
//
// Wire format, version 1, all integers little-endian:
//   header   magic "SIBV" (u32 0x56424953), version u16, nqps u16, body bytes u32
//   per qp   qpn u32, psn u32, lid u16, port u8, link_layer u8 (1 IB, 2 Ethernet),
//            mtu u8 (ibv_mtu 1..5), gid_index u8, pad u16, gid 16 bytes,
//            ring_addr u64, ring_rkey u32, nslots u32, slot_bytes u32, credit_rkey u32,
//            credit_addr u64, device name 32 bytes (NUL-padded)           = 96 bytes
//   trailer  FNV-1a 32 of everything before it
// decode() refuses anything else: wrong magic, another version, a length that does not
// match nqps, a bad checksum, or a field out of range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::ibverbs {

inline constexpr uint32_t kWireMagic = 0x56424953;  // "SIBV"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kWireHeaderBytes = 12;
inline constexpr size_t kWireQpBytes = 96;
inline constexpr size_t kMaxQps = 16;
inline constexpr uint8_t kLinkIb = 1, kLinkEthernet = 2;

struct QpInfo {
  uint32_t qpn = 0, psn = 0;
  uint16_t lid = 0;
  uint8_t port = 1, link_layer = kLinkIb, mtu = 3, gid_index = 0;
  uint8_t gid[16] = {};
  uint64_t ring_addr = 0;
  uint32_t ring_rkey = 0, nslots = 0, slot_bytes = 0, credit_rkey = 0;
  uint64_t credit_addr = 0;
  std::string device;  // at most 31 characters
};

struct ConnInfo {
  std::vector<QpInfo> qps;
};

std::vector<char> encode(const ConnInfo& info);
// Throws SystemError("malformed ibverbs connection info from <from>: <why>").
ConnInfo decode(const char* data, size_t bytes, const std::string& from);

uint32_t fnv1a32(const unsigned char* p, size_t n);

}  // namespace strata::ibverbs
