// STRATA_* configuration, read from the environment when a communicator is created.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace strata {

std::optional<std::string> env_string(const char* name);
// Throws InvalidArgument naming the variable when it is set but not a number in [lo, hi].
long long env_int(const char* name, long long fallback, long long lo, long long hi);
double env_double(const char* name, double fallback, double lo, double hi);

struct Config {
  double timeout_s;          // STRATA_TIMEOUT: seconds without progress before a peer is declared stuck
  std::string transport;     // STRATA_TRANSPORT: "" (auto), "shm", "tcp", "ucx" or "ibverbs"
  std::string algo;          // STRATA_ALGO: "" (auto), "ring", "tree", "recursive_doubling", "direct"
  int tcp_nsocks;            // STRATA_TCP_NSOCKS: data sockets per peer over tcp
  size_t shm_ring_bytes;     // STRATA_SHM_RING_BYTES: capacity of each shared-memory FIFO
  size_t chunk_bytes;        // STRATA_CHUNK_BYTES: pipelining unit of chain algorithms
  size_t staging_bytes;      // STRATA_TCP_STAGING_BYTES: receive buffer for reducing tcp data
  std::string host;          // STRATA_HOST: override of this rank's host identity

  static Config from_env();
};

}  // namespace strata
