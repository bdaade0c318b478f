// How the test workers (strata-failure-worker, strata-reliability-worker) print a caught
// strata::Error on one line: " class=... kind=... peer=... msg=...", read back by
// failure_job.hpp's field().
#pragma once

#include <strata/strata.hpp>

#include <string>

namespace strata_test {

inline const char* kind_name(strata::ErrorKind k) {
  switch (k) {
    case strata::ErrorKind::invalid_argument: return "invalid_argument";
    case strata::ErrorKind::invalid_usage: return "invalid_usage";
    case strata::ErrorKind::remote: return "remote";
    case strata::ErrorKind::timeout: return "timeout";
    case strata::ErrorKind::system: return "system";
    case strata::ErrorKind::internal: return "internal";
  }
  return "?";
}

inline std::string error_fields(const strata::Error& e) {
  using namespace strata;
  const auto* p = dynamic_cast<const PeerError*>(&e);
  const char* cls = dynamic_cast<const TimeoutError*>(&e)      ? "TimeoutError"
                    : p                                          ? "PeerError"
                    : dynamic_cast<const InvalidArgument*>(&e)  ? "InvalidArgument"
                    : dynamic_cast<const InvalidUsage*>(&e)     ? "InvalidUsage"
                                                                 : "Error";
  std::string msg = e.what();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  return std::string(" class=") + cls + " kind=" + kind_name(e.kind()) + " peer=" + std::to_string(p ? p->peer() : -1) +
         " msg=" + msg;
}

}  // namespace strata_test
