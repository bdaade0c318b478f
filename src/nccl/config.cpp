#include "config.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "strata/error.hpp"

namespace strata_nccl {

namespace {

// The field at `offset` if the caller's struct reaches it and it is not NCCL_CONFIG_UNDEF_INT.
std::optional<int> int_field(const ncclConfig_t* c, size_t offset) {
  if (offset + sizeof(int) > c->size) return std::nullopt;
  int v;
  std::memcpy(&v, reinterpret_cast<const char*>(c) + offset, sizeof v);
  if (v == NCCL_CONFIG_UNDEF_INT) return std::nullopt;
  return v;
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

}  // namespace

Settings read_config(const ncclConfig_t* c, const Settings& inherited) {
  Settings s = inherited;
  if (!c) return s;
  if (c->magic != STRATA_NCCL_CONFIG_MAGIC)
    throw strata::InvalidArgument("config->magic is " + hex(c->magic) + ", not " + hex(STRATA_NCCL_CONFIG_MAGIC) +
                                  ": initialise the config with NCCL_CONFIG_INITIALIZER");
  constexpr unsigned kFirst = NCCL_VERSION(2, 14, 0);  // the first NCCL with ncclConfig_t
  if (c->version < kFirst)
    throw strata::InvalidArgument("config->version is " + std::to_string(c->version) +
                                  ", older than ncclConfig_t itself (" + std::to_string(kFirst) + ")");
  constexpr size_t kLeast = offsetof(ncclConfig_t, blocking) + sizeof(int);
  if (c->size < kLeast)
    throw strata::InvalidArgument("config->size is " + std::to_string(c->size) + " bytes, less than the " +
                                  std::to_string(kLeast) + " of any NCCL's ncclConfig_t");
  if (auto b = int_field(c, offsetof(ncclConfig_t, blocking))) {
    if (*b != 0 && *b != 1)
      throw strata::InvalidArgument("config->blocking is " + std::to_string(*b) + "; expected 0 or 1");
    s.blocking = *b == 1;
  }
  return s;
}

}  // namespace strata_nccl
