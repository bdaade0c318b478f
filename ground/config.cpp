// The settings' parts that log (settings.hpp): the warning about unknown STRATA_* variables
// and the Config a communicator is made with, which gives it. settings.cpp (the table and
// its parsing) logs nothing, so that log.cpp can read its level from the table.
#include "ground/settings.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "ground/log.hpp"

extern char** environ;

namespace strata {

namespace settings {

void warn_unknown() {
  static std::mutex m;
  static std::set<std::string> warned;
  std::lock_guard lk(m);
  const std::span<const Setting> table = all();
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.substr(0, 7) != "STRATA_") continue;
    std::string name(kv.substr(0, kv.find('=')));
    bool known = std::any_of(table.begin(), table.end(), [&](const Setting& s) { return name == s.name; });
    if (known || !warned.insert(name).second) continue;
    STRATA_WARN("%s is not a Strata setting; did you mean %s? (docs/environment.md lists them)", name.c_str(),
                closest(name).c_str());
  }
}

}  // namespace settings

Config Config::from_env() {
  settings::warn_unknown();
  settings::check_all();
  Config c;
  c.timeout_s = settings::number("STRATA_TIMEOUT");
  c.transport = settings::text("STRATA_TRANSPORT");
  c.algo = settings::text("STRATA_ALGO");
  c.tcp_nsocks = static_cast<int>(settings::integer("STRATA_TCP_NSOCKS"));
  // The shared-memory FIFO aligns every message to 64 bytes: keep its size a multiple.
  c.shm_ring_bytes = static_cast<size_t>(settings::integer("STRATA_SHM_RING_BYTES")) & ~static_cast<size_t>(63);
  c.shm_rank_bytes = static_cast<size_t>(settings::integer("STRATA_SHM_RANK_BYTES"));
  c.chunk_bytes = static_cast<size_t>(settings::integer("STRATA_CHUNK_BYTES"));
  c.chunk_bytes_set = settings::is_set("STRATA_CHUNK_BYTES");
  c.staging_bytes = static_cast<size_t>(settings::integer("STRATA_TCP_STAGING_BYTES"));
  c.host = settings::text("STRATA_HOST");
  c.check = settings::integer("STRATA_CHECK") == 1;
  return c;
}

}  // namespace strata
