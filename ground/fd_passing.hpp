// Passing file descriptors between processes of one host: one message of plain bytes
// with up to kMaxFds descriptors beside it (SCM_RIGHTS) over an AF_UNIX stream socket.
// How device allocations travel (ground/device/ipc_handle.hpp): a memfd, or CUDA's
// cuMem POSIX fd.
#pragma once

#include <cstddef>
#include <span>

namespace strata {

inline constexpr size_t kMaxFds = 8;

// Sends all `bytes` of `data` (at least 1) with `fds` attached to the first byte. Blocks;
// SystemError naming the call on failure. The fds stay the caller's.
void send_with_fds(int sock, const void* data, size_t bytes, std::span<const int> fds);
// Receives exactly `bytes` of data and the fds sent with them, into `fds`; returns how
// many came (close-on-exec, owned by the caller). Descriptors beyond fds.size() are
// closed and make it a SystemError, as is a peer that closed the socket first.
size_t recv_with_fds(int sock, void* data, size_t bytes, std::span<int> fds);

}  // namespace strata
