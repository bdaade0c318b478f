// STRATA_DEBUG logging in the manner of NCCL_DEBUG: WARN (default), INFO, TRACE.
// Lines look like "host:pid:tid [rank] STRATA INFO message".
#pragma once

#include <cstdarg>

namespace strata::log {

enum class Level { none = 0, warn = 1, info = 2, trace = 3 };

Level level();
bool enabled(Level l);
// The rank shown in log lines of this thread (-1 before a communicator exists).
void set_thread_rank(int rank);
void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace strata::log

#define STRATA_WARN(...) ::strata::log::write(::strata::log::Level::warn, __VA_ARGS__)
#define STRATA_INFO(...)                                                                  \
  do {                                                                                    \
    if (::strata::log::enabled(::strata::log::Level::info))                               \
      ::strata::log::write(::strata::log::Level::info, __VA_ARGS__);                      \
  } while (0)
#define STRATA_TRACE(...)                                                                 \
  do {                                                                                    \
    if (::strata::log::enabled(::strata::log::Level::trace))                              \
      ::strata::log::write(::strata::log::Level::trace, __VA_ARGS__);                     \
  } while (0)
