// UCX transport: tag layout and how transfers are cut into messages.
#include <gtest/gtest.h>

#include "transports/ucx/ucx_tag.hpp"

using namespace strata::ucx;

TEST(UcxTag, RoundTripsRankAndSequence) {
  for (int rank : {0, 1, 7, 4095, kMaxRanks - 1})
    for (uint64_t seq : {uint64_t(0), uint64_t(1), uint64_t(123456789), kSeqMask}) {
      uint64_t t = make_tag(rank, seq);
      EXPECT_EQ(tag_rank(t), rank);
      EXPECT_EQ(tag_seq(t), seq);
    }
}

TEST(UcxTag, CreditsHaveTheirOwnSpace) {
  for (int rank : {0, 3, kMaxRanks - 1})
    for (uint64_t seq : {uint64_t(0), uint64_t(9), kSeqMask}) {
      uint64_t data = make_tag(rank, seq), credit = make_tag(rank, seq, TagKind::credit);
      EXPECT_NE(data, credit);
      EXPECT_EQ(tag_kind(data), TagKind::data);
      EXPECT_EQ(tag_kind(credit), TagKind::credit);
      EXPECT_EQ(tag_rank(credit), rank);
      EXPECT_EQ(tag_seq(credit), seq);
    }
}

TEST(UcxTag, DistinctPerRankAndSequence) {
  EXPECT_NE(make_tag(1, 0), make_tag(0, 1));
  EXPECT_NE(make_tag(2, 5), make_tag(3, 5));
  // The sequence wraps after 2^39 messages without touching the kind or rank bits.
  EXPECT_EQ(make_tag(5, kSeqMask + 1), make_tag(5, 0));
  EXPECT_EQ(tag_rank(make_tag(5, kSeqMask + 1)), 5);
  EXPECT_EQ(tag_kind(make_tag(5, kSeqMask + 1)), TagKind::data);
}

TEST(UcxTag, ChunksCoverTheTransferExactly) {
  for (size_t chunk : {size_t(4096), size_t(1) << 20})
    for (size_t bytes : {size_t(0), size_t(1), chunk - 1, chunk, chunk + 1, 3 * chunk, 3 * chunk + 17}) {
      size_t n = chunk_count(bytes, chunk), total = 0;
      for (size_t i = 0; i < n; ++i) {
        size_t b = chunk_bytes(bytes, chunk, i);
        EXPECT_GT(b, 0u);
        EXPECT_LE(b, chunk);
        total += b;
      }
      EXPECT_EQ(total, bytes) << bytes << " in chunks of " << chunk;
      EXPECT_EQ(chunk_bytes(bytes, chunk, n), 0u);
    }
}
