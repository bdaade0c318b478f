#include "ground/log.hpp"
#include "ground/settings.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace strata::log {

namespace {
// initial-exec: set on every call; the default model for a shared library goes through
// __tls_get_addr each time.
[[gnu::tls_model("initial-exec")]] thread_local int tls_rank = -1;

// A malformed STRATA_DEBUG is refused by every communicator's creation
// (settings::check_all); a line logged before that, or by a tool that makes none, uses
// the default and says so once. Not through write(): the level is not known yet.
Level parse_level() {
  std::string v;
  try {
    v = settings::text("STRATA_DEBUG");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "STRATA WARN %s; logging at WARN\n", e.what());
  }
  if (v == "NONE") return Level::none;
  if (v == "INFO") return Level::info;
  if (v == "TRACE") return Level::trace;
  return Level::warn;
}
}  // namespace

Level level() {
  static const Level l = parse_level();
  return l;
}

bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

void set_thread_rank(int rank) { tls_rank = rank; }

void write(Level l, const char* fmt, ...) {
  if (!enabled(l)) return;
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  // One fprintf per line so that lines from threads do not interleave.
  fprintf(stderr, "%s:%d:%ld [%d] STRATA %s %s\n", host, static_cast<int>(getpid()),
          static_cast<long>(syscall(SYS_gettid)), tls_rank, names[static_cast<int>(l)], msg);
}

}  // namespace strata::log
