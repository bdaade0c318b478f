#include "ground/env.hpp"

#include <cerrno>
#include <cstdlib>

#include "strata/error.hpp"

namespace strata {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

long long env_int(const char* name, long long fallback, long long lo, long long hi) {
  auto v = env_string(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  // Accept K/M/G suffixes (powers of 1024), as byte sizes are the common case.
  if (end && (*end == 'K' || *end == 'k')) x <<= 10, ++end;
  else if (end && (*end == 'M' || *end == 'm')) x <<= 20, ++end;
  else if (end && (*end == 'G' || *end == 'g')) x <<= 30, ++end;
  if (errno || end == v->c_str() || *end != '\0' || x < lo || x > hi)
    throw InvalidArgument(std::string(name) + "=" + *v + " is not an integer in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

double env_double(const char* name, double fallback, double lo, double hi) {
  auto v = env_string(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !(x >= lo && x <= hi))
    throw InvalidArgument(std::string(name) + "=" + *v + " is not a number in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

static std::string env_choice(const char* name, std::initializer_list<const char*> allowed) {
  auto v = env_string(name);
  if (!v) return "";
  for (const char* a : allowed)
    if (*v == a) return *v;
  std::string list;
  for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
  throw InvalidArgument(std::string(name) + "=" + *v + " is not one of: " + list);
}

Config Config::from_env() {
  Config c;
  c.timeout_s = env_double("STRATA_TIMEOUT", 300.0, 0.1, 1e7);
  c.transport = env_choice("STRATA_TRANSPORT", {"shm", "tcp", "ucx", "ibverbs"});
  c.algo = env_choice("STRATA_ALGO", {"ring", "tree", "recursive_doubling", "direct", "hierarchical", "rabenseifner"});
  c.tcp_nsocks = static_cast<int>(env_int("STRATA_TCP_NSOCKS", 2, 1, 16));
  c.shm_ring_bytes = static_cast<size_t>(env_int("STRATA_SHM_RING_BYTES", 4 << 20, 4096, 1LL << 30));
  c.chunk_bytes = static_cast<size_t>(env_int("STRATA_CHUNK_BYTES", 512 << 10, 64, 1LL << 30));
  c.staging_bytes = static_cast<size_t>(env_int("STRATA_TCP_STAGING_BYTES", 1 << 20, 4096, 1LL << 30));
  c.host = env_string("STRATA_HOST").value_or("");
  // The shared-memory FIFO aligns every message to 64 bytes: keep its size a multiple.
  c.shm_ring_bytes &= ~static_cast<size_t>(63);
  return c;
}

}  // namespace strata
