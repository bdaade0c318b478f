#include "transports/agreed_size.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {

struct Blob {
  uint32_t magic;
  uint32_t version;
  uint64_t size;
};
constexpr uint32_t kVersion = 1;

}  // namespace

std::vector<char> propose_size(const SizeProposal& p, uint64_t mine) {
  const Blob b{p.magic, kVersion, mine};
  std::vector<char> out(sizeof b);
  std::memcpy(out.data(), &b, sizeof b);
  return out;
}

uint64_t agreed_size(const SizeProposal& p, uint64_t mine, int peer, const std::vector<char>& theirs) {
  const std::string what = std::string("unexpected ") + p.row + " connection info from rank " + std::to_string(peer);
  Blob b{};
  if (theirs.size() != sizeof b) throw SystemError(what);
  std::memcpy(&b, theirs.data(), sizeof b);
  if (b.magic != p.magic || b.version != kVersion || b.size == 0 || b.size % p.multiple != 0)
    throw SystemError(what + " (a different Strata version?)");
  return std::min(mine, b.size);
}

}  // namespace strata
