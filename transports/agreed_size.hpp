// The connection info of a row whose handshake is one size each rank proposes and both
// ends then use the smaller of (ipc: the mapping cache, whose two copies must evict
// alike; staging: the chunk size, so both cut every transfer alike).
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

struct SizeProposal {
  const char* row;    // named in errors
  uint32_t magic;     // the row's own, so a blob of another row or version is refused
  uint64_t multiple;  // the size must be a nonzero multiple of this
};

std::vector<char> propose_size(const SizeProposal& p, uint64_t mine);
// The smaller of `mine` and what `peer` proposed; SystemError when its blob is not a
// proposal of this row and version.
uint64_t agreed_size(const SizeProposal& p, uint64_t mine, int peer, const std::vector<char>& theirs);

}  // namespace strata
