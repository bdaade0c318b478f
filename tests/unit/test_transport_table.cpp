// The transport table's choice per pair (transports/transport_table.hpp) against the rules
// docs/transports.md states ("Choosing a transport per pair"), written out here on their
// own, over every combination of what two ranks can offer.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"
#include "transports/transport_table.hpp"

namespace strata {
namespace {

// The offer's `wanted` values: 0 auto, then the rows' ids; 1 (shm) is never sent, 9 is
// what a newer version might send.
constexpr uint8_t kAuto = 0, kShm = 1, kTcp = 2, kUcx = 3, kIb = 4, kUnknown = 9;
constexpr uint8_t kUcxRdma = kOfferUcxRdma, kIbPort = kOfferIbPort;

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

// Calls `check(same_host, wanted a, caps a, wanted b, caps b, what)` for every pair of
// offers (`what` describes it); returns how many.
template <class Check>
int for_every_pair_of_offers(const Check& check) {
  int pairs = 0;
  for (bool same : {false, true})
    for (uint8_t wa : {kAuto, kShm, kTcp, kUcx, kIb, kUnknown})
      for (uint8_t wb : {kAuto, kShm, kTcp, kUcx, kIb, kUnknown})
        for (uint8_t ca = 0; ca < 8; ++ca)
          for (uint8_t cb = 0; cb < 8; ++cb, ++pairs)
            check(same, wa, ca, wb, cb,
                  "same host " + std::to_string(same) + ", wanted " + std::to_string(wa) + "/" + std::to_string(wb) +
                      ", caps " + std::to_string(ca) + "/" + std::to_string(cb));
  return pairs;
}

TEST(TransportTable, EveryPairChoosesWhatTheRulesSay) {
  int checked = 0;
  for_every_pair_of_offers([&](bool same, uint8_t wa, uint8_t ca, uint8_t wb, uint8_t cb, const std::string& what) {
    const std::optional<std::string> want = documented(same, wa, ca, wb, cb);
    if (!want) {
      EXPECT_THROW(choose(MemoryKind::host, same, offer(wa, ca), offer(wb, cb), 0, 1), InvalidArgument) << what;
      return;
    }
    const TransportRow* got = choose(MemoryKind::host, same, offer(wa, ca), offer(wb, cb), 0, 1);
    ASSERT_NE(got, nullptr) << what;
    EXPECT_EQ(got->name, *want) << what;
    ++checked;
  });
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

// Device memory, written out on its own: ipc on one host, staging between hosts, where
// both ranks offer a device; nothing where either does not (the engine then names the
// pair). STRATA_TRANSPORT, whatever it names, is about host links and changes nothing
// here, nor does a disagreement about it (the host kind reports that one).
std::string documented_device(bool same_host, uint8_t ca, uint8_t cb) {
  if (!(ca & cb & kOfferDevice)) return "none";
  return same_host ? "ipc" : "staging";
}

TEST(TransportTable, DeviceMemoryGoesByIpcOnOneHostAndStagingBetweenHosts) {
  const int checked =
      for_every_pair_of_offers([](bool same, uint8_t wa, uint8_t ca, uint8_t wb, uint8_t cb, const std::string& what) {
        const TransportRow* got = choose(MemoryKind::device, same, offer(wa, ca), offer(wb, cb), 0, 1);
        EXPECT_EQ(got ? std::string(got->name) : "none", documented_device(same, ca, cb)) << what;
      });
  EXPECT_GT(checked, 4000);
  // The host kind is unchanged by the device capability (its rows ignore the bit).
  EXPECT_EQ(choose(MemoryKind::host, true, offer(kAuto, kOfferDevice), offer(kAuto, kOfferDevice), 0, 1)->name,
            std::string("shm"));
}

// Rows that carry device memory carry nothing else, and STRATA_TRANSPORT cannot name them.
TEST(TransportTable, DeviceRowsAreTheirOwn) {
  int device_rows = 0;
  for (const TransportRow& r : transport_table()) {
    if (!r.memory.has(MemoryKind::device)) continue;
    ++device_rows;
    EXPECT_FALSE(r.memory.has(MemoryKind::host)) << r.name;
    EXPECT_EQ(r.forcing, Forcing::never) << r.name;
    EXPECT_EQ(r.offer_bit, kOfferDevice) << r.name;
  }
  EXPECT_EQ(device_rows, 2);
}

TEST(TransportTable, OfferSaysWhatStrataTransportForces) {
  Config cfg = Config::from_env();
  for (auto [value, wanted] : {std::pair{"", kAuto}, {"shm", kAuto}, {"tcp", kTcp}, {"ucx", kUcx}, {"ibverbs", kIb}}) {
    cfg.transport = value;
    const TransportOffer o = make_offer(cfg, false);
    EXPECT_TRUE(o.valid());
    EXPECT_EQ(o.wanted, wanted) << value;
    EXPECT_EQ(o.caps & ~kOfferDevice, 0) << value << ": RDMA is not probed without a peer on another host";
    EXPECT_EQ((o.caps & kOfferDevice) != 0, device::backend_possible()) << value << ": the device bit is always asked";
  }
  EXPECT_EQ(row_named("tcp")->name, std::string("tcp"));
  EXPECT_EQ(row_named("auto"), nullptr);
}

}  // namespace
}  // namespace strata
