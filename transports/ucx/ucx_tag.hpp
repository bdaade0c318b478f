// Pure helpers of the UCX transport (no UCX needed): the tag that carries (source rank,
// sequence number) and how a transfer is cut into messages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::ucx {

// Tag layout: the sender's rank in the high 24 bits, then one bit for the kind of message
// (data, or a credit of the one-sided path going back), then the per-direction sequence
// number of that kind in the low 39. A receive matches exactly one (rank, kind, sequence),
// so messages pair up in posting order whatever order UCX delivers them in.
inline constexpr int kSeqBits = 39;
inline constexpr uint64_t kSeqMask = (uint64_t(1) << kSeqBits) - 1;
inline constexpr int kMaxRanks = 1 << (64 - kSeqBits - 1);
inline constexpr uint64_t kFullMask = ~uint64_t(0);

enum class TagKind : uint64_t { data = 0, credit = 1 };

inline uint64_t make_tag(int src_rank, uint64_t seq, TagKind kind = TagKind::data) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(src_rank)) << (kSeqBits + 1)) |
         (static_cast<uint64_t>(kind) << kSeqBits) | (seq & kSeqMask);
}
inline int tag_rank(uint64_t tag) { return static_cast<int>(tag >> (kSeqBits + 1)); }
inline TagKind tag_kind(uint64_t tag) { return static_cast<TagKind>((tag >> kSeqBits) & 1); }
inline uint64_t tag_seq(uint64_t tag) { return tag & kSeqMask; }

// A transfer of `bytes` travels as ceil(bytes / chunk) messages of `chunk` bytes (the last
// one shorter); an empty transfer sends nothing. Both sides compute the same cut, so a
// reducing receive can stage one chunk at a time.
inline size_t chunk_count(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }
inline size_t chunk_bytes(size_t bytes, size_t chunk, size_t i) {
  size_t begin = i * chunk;
  return begin >= bytes ? 0 : (bytes - begin < chunk ? bytes - begin : chunk);
}

}  // namespace strata::ucx
