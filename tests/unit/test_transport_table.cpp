// The transport table's choice per pair (transports/transport_table.hpp) against the rules
// docs/transports.md states ("Choosing a transport per pair"), written out here on their
// own, over every combination of what two ranks can offer.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "strata/error.hpp"
#include "transports/transport_table.hpp"

namespace strata {
namespace {

// The offer's `wanted` values: 0 auto, then the rows' ids; 1 (shm) is never sent, 9 is
// what a newer version might send.
constexpr uint8_t kAuto = 0, kShm = 1, kTcp = 2, kUcx = 3, kIb = 4, kUnknown = 9;
constexpr uint8_t kUcxRdma = 1, kIbPort = 2;

// The documented rules; nullopt: creation fails (the ranks name different transports).
std::optional<std::string> documented(bool same_host, uint8_t wa, uint8_t ca, uint8_t wb, uint8_t cb) {
  auto rdma = [](uint8_t w) { return w == kUcx || w == kIb; };
  if (rdma(wa) || rdma(wb)) {  // 1. ucx or ibverbs on either side: both must ask for the same
    if (wa != wb) return std::nullopt;
    return wa == kUcx ? "ucx" : "ibverbs";
  }
  if (same_host && wa != kTcp && wb != kTcp) return "shm";  // 2. same host, and no tcp
  if (wa == kTcp || wb == kTcp) return "tcp";                // 3. tcp on either side
  if (ca & cb & kUcxRdma) return "ucx";                      // 4. RDMA on both ends
  if (ca & cb & kIbPort) return "ibverbs";
  return "tcp";
}

TransportOffer offer(uint8_t wanted, uint8_t caps) { return {TransportOffer::kMagic, 1, wanted, caps, 0}; }

TEST(TransportTable, EveryPairChoosesWhatTheRulesSay) {
  int checked = 0;
  for (bool same : {false, true})
    for (uint8_t wa : {kAuto, kShm, kTcp, kUcx, kIb, kUnknown})
      for (uint8_t wb : {kAuto, kShm, kTcp, kUcx, kIb, kUnknown})
        for (uint8_t ca = 0; ca < 4; ++ca)
          for (uint8_t cb = 0; cb < 4; ++cb) {
            const std::optional<std::string> want = documented(same, wa, ca, wb, cb);
            const std::string what = "same host " + std::to_string(same) + ", wanted " + std::to_string(wa) + "/" +
                                     std::to_string(wb) + ", caps " + std::to_string(ca) + "/" + std::to_string(cb);
            if (!want) {
              EXPECT_THROW(choose(MemoryKind::host, same, offer(wa, ca), offer(wb, cb), 0, 1), InvalidArgument) << what;
              continue;
            }
            const TransportRow* got = choose(MemoryKind::host, same, offer(wa, ca), offer(wb, cb), 0, 1);
            ASSERT_NE(got, nullptr) << what;
            EXPECT_EQ(got->name, *want) << what;
            ++checked;
          }
  EXPECT_GT(checked, 500);
}

TEST(TransportTable, DisagreementNamesBothRanksAndTheirValues) {
  try {
    choose(MemoryKind::host, true, offer(kUcx, 0), offer(kAuto, 0), 0, 1);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "STRATA_TRANSPORT is ucx on rank 0 but auto on rank 1; set the same value on every rank");
  }
  try {
    choose(MemoryKind::host, false, offer(kTcp, 0), offer(kIb, 0), 2, 5);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "STRATA_TRANSPORT is tcp on rank 2 but ibverbs on rank 5; set the same value on every rank");
  }
}

// Only host memory has rows today: device buffers get no link (the engine then names the
// pair in its error) rather than a host link that would read them.
TEST(TransportTable, NoRowCarriesDeviceMemoryYet) {
  for (const TransportRow& r : transport_table()) EXPECT_FALSE(r.memory.has(MemoryKind::device)) << r.name;
  EXPECT_EQ(choose(MemoryKind::device, true, offer(kAuto, 3), offer(kAuto, 3), 0, 1), nullptr);
  EXPECT_EQ(choose(MemoryKind::device, false, offer(kTcp, 0), offer(kTcp, 0), 0, 1), nullptr);
}

TEST(TransportTable, OfferSaysWhatStrataTransportForces) {
  Config cfg = Config::from_env();
  for (auto [value, wanted] : {std::pair{"", kAuto}, {"shm", kAuto}, {"tcp", kTcp}, {"ucx", kUcx}, {"ibverbs", kIb}}) {
    cfg.transport = value;
    const TransportOffer o = make_offer(cfg, false);
    EXPECT_TRUE(o.valid());
    EXPECT_EQ(o.wanted, wanted) << value;
    EXPECT_EQ(o.caps, 0) << value << ": nothing is probed without a peer on another host";
  }
  EXPECT_EQ(row_named("tcp")->name, std::string("tcp"));
  EXPECT_EQ(row_named("auto"), nullptr);
}

}  // namespace
}  // namespace strata
