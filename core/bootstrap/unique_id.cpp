#include "core/bootstrap/unique_id.hpp"

#include <sys/random.h>

#include <cstring>

namespace strata::bootstrap {

namespace {
constexpr uint64_t kIdMagic = 0x5354524154414944ull;  // "STRATAID"

struct Wire {
  uint64_t magic;
  uint8_t secret[16];
  uint32_t addr_len;
  uint8_t addr[sizeof(sockaddr_in6)];
};
static_assert(sizeof(Wire) <= sizeof(UniqueId::bytes));
}  // namespace

UniqueId encode_id(const IdFields& f) {
  Wire w{};
  w.magic = kIdMagic;
  std::memcpy(w.secret, f.secret.bytes, 16);
  w.addr_len = f.root.len;
  std::memcpy(w.addr, &f.root.ss, std::min<size_t>(f.root.len, sizeof w.addr));
  UniqueId id;
  std::memcpy(id.bytes.data(), &w, sizeof w);
  return id;
}

IdFields decode_id(const UniqueId& id) {
  Wire w;
  std::memcpy(&w, id.bytes.data(), sizeof w);
  if (w.magic != kIdMagic || w.addr_len == 0 || w.addr_len > sizeof w.addr)
    throw InvalidArgument("the unique id was not made by strata::get_unique_id (bad magic or address)");
  IdFields f;
  std::memcpy(f.secret.bytes, w.secret, 16);
  f.root.len = w.addr_len;
  std::memcpy(&f.root.ss, w.addr, w.addr_len);
  return f;
}

Secret random_secret() {
  Secret s;
  size_t got = 0;
  while (got < sizeof s.bytes) {
    ssize_t r = getrandom(s.bytes + got, sizeof s.bytes - got, 0);
    if (r < 0) throw SystemError("getrandom failed");
    got += static_cast<size_t>(r);
  }
  return s;
}

Secret parse_secret_hex(const std::string& hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Secret s;
  bool ok = hex.size() == 32;
  for (size_t i = 0; ok && i < 16; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) s.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (!ok) throw InvalidArgument("STRATA_SECRET must be 32 hex digits");
  return s;
}

}  // namespace strata::bootstrap
