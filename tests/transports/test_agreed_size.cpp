// The size handshake of the ipc and staging rows: both ends reach the same size, and a
// blob that is not this row's proposal is refused naming the row and the peer.
#include <gtest/gtest.h>

#include "strata/error.hpp"
#include "transports/agreed_size.hpp"

namespace strata {
namespace {

constexpr SizeProposal kA{"ipc", 0x11111111, 1}, kB{"staging", 0x22222222, 64};

TEST(AgreedSize, BothEndsTakeTheSmaller) {
  for (auto [x, y] : {std::pair<uint64_t, uint64_t>{64, 1024}, {1024, 64}, {128, 128}}) {
    EXPECT_EQ(agreed_size(kB, x, 1, propose_size(kB, y)), std::min(x, y));
    EXPECT_EQ(agreed_size(kB, y, 0, propose_size(kB, x)), std::min(x, y));
  }
}

void expect_refused(const SizeProposal& p, const std::vector<char>& blob, const std::string& what) {
  try {
    agreed_size(p, 64, 3, blob);
    FAIL() << "accepted " << what;
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find(std::string("unexpected ") + p.row + " connection info from rank 3"), std::string::npos)
        << e.what();
  }
}

TEST(AgreedSize, RefusesWhatIsNotThisRowsProposal) {
  expect_refused(kB, propose_size(kA, 64), "another row's proposal");
  expect_refused(kB, propose_size(kB, 100), "a size that is not a multiple");
  expect_refused(kA, propose_size(kA, 0), "a zero size");
  std::vector<char> longer = propose_size(kA, 64);
  longer.push_back(0);
  expect_refused(kA, longer, "a longer blob");
  expect_refused(kA, {}, "an empty blob");
}

}  // namespace
}  // namespace strata
