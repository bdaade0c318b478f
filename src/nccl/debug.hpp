// NCCL_DEBUG mapped onto STRATA_DEBUG (docs/nccl.md): when the library is loaded, and only
// where STRATA_DEBUG is not set, NCCL_DEBUG's level becomes Strata's (Strata reads it once,
// on first use): NONE -> NONE; VERSION, WARN, ABORT -> WARN; INFO -> INFO; TRACE -> TRACE.
#pragma once

namespace strata_nccl {

// With NCCL_DEBUG=VERSION, INFO or TRACE: prints which library this is, once per process,
// as NCCL prints its version at a communicator's creation.
void announce_version();

}  // namespace strata_nccl
