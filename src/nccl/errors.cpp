#include "errors.hpp"

namespace strata_nccl {

namespace {
thread_local std::string last;
}

ncclResult_t code_of(strata::ErrorKind kind) {
  switch (kind) {
    case strata::ErrorKind::invalid_argument: return ncclInvalidArgument;
    case strata::ErrorKind::invalid_usage: return ncclInvalidUsage;
    case strata::ErrorKind::remote: return ncclRemoteError;
    case strata::ErrorKind::timeout: return ncclRemoteError;  // NCCL has no code of its own for a silent peer
    case strata::ErrorKind::system: return ncclSystemError;
    case strata::ErrorKind::internal: return ncclInternalError;
  }
  return ncclInternalError;
}

const std::string& last_error() { return last; }

ncclResult_t fail(const char* fn, ncclResult_t code, const std::string& what) {
  last = std::string(fn) + ": " + what;
  return code;
}

}  // namespace strata_nccl
