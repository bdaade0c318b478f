#include "debug.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "nccl/nccl.h"

namespace strata_nccl {

namespace {

std::string nccl_debug() {
  const char* v = std::getenv("NCCL_DEBUG");
  std::string s = v ? v : "";
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* strata_level(const std::string& nccl) {
  if (nccl == "NONE") return "NONE";
  if (nccl == "VERSION" || nccl == "WARN" || nccl == "ABORT") return "WARN";
  if (nccl == "INFO") return "INFO";
  if (nccl == "TRACE") return "TRACE";
  return nullptr;  // unset or unknown: Strata's default
}

__attribute__((constructor)) void map_debug_level() {
  if (const char* level = strata_level(nccl_debug()); level && !std::getenv("STRATA_DEBUG"))
    setenv("STRATA_DEBUG", level, 0);
}

}  // namespace

void announce_version() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string d = nccl_debug();
    if (d == "VERSION" || d == "INFO" || d == "TRACE")
      std::fprintf(stderr, "NCCL version %d.%d.%d+strata%s (Strata's libnccl.so.2)\n", NCCL_MAJOR, NCCL_MINOR,
                   NCCL_PATCH, STRATA_VERSION);
  });
}

}  // namespace strata_nccl
