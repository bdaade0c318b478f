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

bool parse_hex(const std::string& hex, uint8_t* out, size_t n) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

Secret parse_secret_hex(const std::string& hex) {
  Secret s;
  if (!parse_hex(hex, s.bytes, sizeof s.bytes)) throw InvalidArgument("STRATA_SECRET must be 32 hex digits");
  return s;
}

namespace {
uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i) x |= uint64_t{p[i]} << (8 * i);
  return x;
}
}  // namespace

uint64_t siphash24(const uint8_t key[16], const void* data, size_t len) {
  const uint64_t k0 = load_le(key, 8), k1 = load_le(key + 8, 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto rounds = [&](int n) {
    for (int i = 0; i < n; ++i) {
      v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
      v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
      v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
      v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
    }
  };
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m = load_le(p + i, 8);
    v3 ^= m, rounds(2), v0 ^= m;
  }
  uint64_t last = load_le(p + whole, len % 8) | (uint64_t{len & 0xff} << 56);
  v3 ^= last, rounds(2), v0 ^= last;
  v2 ^= 0xff;
  rounds(4);
  return v0 ^ v1 ^ v2 ^ v3;
}

Secret derive_secret(const Secret& key, const std::string& job_id) {
  Secret s;
  for (int half = 0; half < 2; ++half) {
    std::string msg = "strata-secret-" + std::to_string(half) + ":" + job_id;
    uint64_t h = siphash24(key.bytes, msg.data(), msg.size());
    for (int i = 0; i < 8; ++i) s.bytes[8 * half + i] = static_cast<uint8_t>(h >> (8 * i));
  }
  return s;
}

}  // namespace strata::bootstrap
