// How a failure reaches an NCCL caller: NCCL's result code, and a message that
// ncclGetLastError returns. Every entry point runs its body through `guarded`, which turns
// Strata's exceptions (include/strata/error.hpp) into codes.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "nccl/nccl.h"
#include "strata/error.hpp"

namespace strata_nccl {

ncclResult_t code_of(strata::ErrorKind kind);

// This thread's last failure ("" before any).
const std::string& last_error();
// Records `what` (prefixed by the function's name) as this thread's last failure.
ncclResult_t fail(const char* fn, ncclResult_t code, const std::string& what);

template <typename F>
ncclResult_t guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const strata::Error& e) {
    return fail(fn, code_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(fn, ncclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return fail(fn, ncclInternalError, e.what());
  }
}

}  // namespace strata_nccl
