// Pure helpers of the UCX transport (no UCX needed): the tag that carries (source rank,
// sequence number) and how a transfer is cut into messages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::ucx {

// Tag layout: the sender's rank in the high 24 bits, the per-direction message sequence
// number in the low 40. A receive matches exactly one (rank, sequence), so messages pair up
// in posting order whatever order UCX delivers them in.
inline constexpr int kSeqBits = 40;
inline constexpr uint64_t kSeqMask = (uint64_t(1) << kSeqBits) - 1;
inline constexpr int kMaxRanks = 1 << (64 - kSeqBits);
inline constexpr uint64_t kFullMask = ~uint64_t(0);

inline uint64_t make_tag(int src_rank, uint64_t seq) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(src_rank)) << kSeqBits) | (seq & kSeqMask);
}
inline int tag_rank(uint64_t tag) { return static_cast<int>(tag >> kSeqBits); }
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
