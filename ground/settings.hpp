// Every STRATA_* setting, declared once (ground/settings.cpp's table: name, type, default,
// range or choices, lifetime, one line of help) and parsed in one place. Code reads a
// setting by name through the typed accessors below; docs/environment.md is checked
// against the table by tests/unit/test_settings.cpp.
//
// Case: a choice (STRATA_DEBUG=info, STRATA_TRANSPORT=TCP) and a size suffix (64k) match
// whatever their case; a choice reads back as the table spells it.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace strata {

namespace settings {

enum class Type { integer, number, text };
// process: read once, at first use (e.g. the log level); communicator: read again each
// time a communicator is created.
enum class Lifetime { process, communicator };

struct Setting {
  const char* name;
  Type type;
  double fallback, lo, hi;  // integer (K/M/G suffixes: powers of 1024) and number
  const char* choices;      // text: the values allowed, "a|b|c"; null: a grammar its reader checks, or any text
  Lifetime life;
  const char* help;
};

std::span<const Setting> all();
// The declaration of `name` (InternalError for a name the table lacks: a typo in code).
const Setting& find(std::string_view name);

// The value as set; nullopt when unset or empty.
std::optional<std::string> raw(const char* name);
// Typed values, the table's default when unset; a malformed or out-of-range value is an
// InvalidArgument naming the variable and what it accepts.
long long integer(const char* name);
double number(const char* name);
// The one integer grammar (decimal, an optional K/M/G suffix), for the table's integers
// and for a launcher's variables (RANK, OMPI_COMM_WORLD_SIZE, ...): "NAME=value is not an
// integer in [lo, hi]" when malformed or out of range.
long long parse_integer(std::string_view name, const std::string& value, long long lo, long long hi);
std::string text(const char* name);  // "" when unset; a choice as the table spells it
bool is_set(const char* name);
// `value` as one of `choices` ("a|b|c", matched ignoring case), spelt as there; else an
// InvalidArgument "NAME=value is not one of: a, b, c". text() uses it for the table's
// choices; a reader whose list lives above the ground (STRATA_ALGO) passes its own.
std::string choose(std::string_view name, std::string_view value, std::string_view choices);
// Parses every variable of the table that is set by its declared type, range and
// choices: the first malformed one is an InvalidArgument naming it. Every communicator's
// creation runs it (Config::from_env), process-lifetime settings included.
void check_all();

// The known setting closest to `unknown` (edit distance), for the misspelling warning.
std::string closest(std::string_view unknown);
// Warns, once per name per process, about each STRATA_* variable in the environment that
// the table lacks, naming the closest known one. Run whenever a communicator's settings
// are read (Config::from_env). Both are in ground/config.cpp, the settings' one file that
// logs: settings.cpp does not, as log.cpp reads its level (STRATA_DEBUG) through it.
void warn_unknown();

}  // namespace settings

// The settings a communicator is made with, read when it is created.
struct Config {
  double timeout_s;                             // STRATA_TIMEOUT, or CommOptions::timeout_s
  const char* timeout_from = "STRATA_TIMEOUT";  // which of the two, for messages
  std::string transport;                        // STRATA_TRANSPORT: "" (auto), "shm", "tcp", "ucx" or "ibverbs"
  std::string algo;                             // STRATA_ALGO: "" (the tuner) or an algorithm's name
  int tcp_nsocks;                               // STRATA_TCP_NSOCKS
  size_t shm_ring_bytes;                        // STRATA_SHM_RING_BYTES
  size_t shm_rank_bytes;                        // STRATA_SHM_RANK_BYTES
  size_t chunk_bytes;                           // STRATA_CHUNK_BYTES (default: the tuner's choice, 512 KiB otherwise)
  bool chunk_bytes_set;                         // STRATA_CHUNK_BYTES overrides the tuner's chunk
  size_t staging_bytes;                         // STRATA_TCP_STAGING_BYTES
  std::string host;                             // STRATA_HOST
  bool check;                                   // STRATA_CHECK: compare every call's description across ranks first

  static Config from_env();
};

}  // namespace strata
