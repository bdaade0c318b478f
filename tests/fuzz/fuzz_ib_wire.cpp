// ibverbs connection info (transports/ibverbs/ib_wire), as a peer sends it over the
// control socket. When the first byte is odd the harness writes the right checksum into
// the trailer first, so inputs also get past it to the fields.
#include <cstring>

#include "strata/error.hpp"
#include "tests/fuzz/fuzz.hpp"
#include "transports/ibverbs/ib_wire.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const bool fix_checksum = in.byte() & 1;
  std::string bytes = in.rest();
  if (fix_checksum && bytes.size() >= 4) {
    uint32_t sum = ibverbs::fnv1a32(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size() - 4);
    for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<char>(sum >> (8 * i));
  }
  try {
    ibverbs::ConnInfo c = ibverbs::decode(bytes.data(), bytes.size(), "fuzz input");
    FUZZ_CHECK(!c.qps.empty() && c.qps.size() <= ibverbs::kMaxQps);
    // What was accepted survives a round trip unchanged.
    std::vector<char> again = ibverbs::encode(c);
    FUZZ_CHECK(again.size() == bytes.size());
    ibverbs::ConnInfo d = ibverbs::decode(again.data(), again.size(), "re-encoded");
    FUZZ_CHECK(d.qps.size() == c.qps.size());
    for (size_t i = 0; i < c.qps.size(); ++i) {
      const ibverbs::QpInfo &a = c.qps[i], &b = d.qps[i];
      FUZZ_CHECK(a.qpn == b.qpn && a.psn == b.psn && a.lid == b.lid && a.port == b.port && a.mtu == b.mtu);
      FUZZ_CHECK(a.ring_addr == b.ring_addr && a.nslots == b.nslots && a.slot_bytes == b.slot_bytes);
      FUZZ_CHECK(a.credit_addr == b.credit_addr && a.device == b.device && std::memcmp(a.gid, b.gid, 16) == 0);
      FUZZ_CHECK(a.device.size() < 32);
    }
  } catch (const SystemError&) {
  }
  return 0;
}
