// The port rank 0's bootstrap root listens on when strata-run (or a test that starts ranks
// itself) chooses it: free on 127.0.0.1, and outside the kernel's ephemeral range. The
// ranks' own listeners bind port 0 and so take ephemeral ports: a root port taken from
// that range can be handed to one of them between our check and rank 0's bind (seen: 1 job
// of 256 in the fault matrix could not start, rank 0's bind finding its port in use by
// rank 1's listener). Another program may still take the port; rank 0 then fails loudly.
// Header-only: strata-run links no library, and the tests share it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace strata::launcher {

// Whether 127.0.0.1:port can be bound now.
inline bool loopback_port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The kernel's choice for port 0 (an ephemeral port), or -1.
inline int kernel_chosen_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? ntohs(addr.sin_port) : -1;
}

// A free port below the ephemeral range (net.ipv4.ip_local_port_range), at random so that
// jobs started at once do not all try the same one. Where that range leaves no room below
// it (or nothing there is free), the kernel's ephemeral choice, with the race above;
// -1 if there is no free port at all.
inline int pick_root_port() {
  int lo = 32768, hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo >> hi;
  const int first = 10000, last = lo - 1;
  if (last > first) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(first, last);
    for (int i = 0; i < 1000; ++i) {
      const int port = pick(rng);
      if (loopback_port_free(port)) return port;
    }
  }
  return kernel_chosen_port();
}

}  // namespace strata::launcher
