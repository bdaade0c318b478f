#include "job_env.hpp"
#include "throw_errno.hpp"

#include "root_port.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <stdexcept>
#include <system_error>

namespace strata::launcher {
namespace {

int pick_free_loopback_port() {
  const int port = pick_root_port();
  if (port < 0) throw std::runtime_error("cannot find a free port on 127.0.0.1");
  return port;
}

std::string random_hex_secret() {
  uint8_t bytes[16];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open /dev/urandom");
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::read(fd, bytes + got, sizeof bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      ::close(fd);
      errno = e;
      throw_errno("cannot read /dev/urandom");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 0xf];
  }
  return s;
}

}  // namespace

JobIdentity make_job_identity() {
  return {"127.0.0.1:" + std::to_string(pick_free_loopback_port()), random_hex_secret()};
}

std::vector<std::string> rank_environment(const char* const* base, const JobIdentity& job,
                                          const RankPlacement& where) {
  const std::pair<std::string_view, std::string> ours[] = {
      {"STRATA_RANK", std::to_string(where.rank)},
      {"STRATA_WORLD_SIZE", std::to_string(where.world_size)},
      {"STRATA_LOCAL_RANK", std::to_string(where.local_rank)},
      {"STRATA_LOCAL_SIZE", std::to_string(where.local_size)},
      {"STRATA_ROOT", job.root},
      {"STRATA_SECRET", job.secret},
  };
  std::vector<std::string> env;
  for (const char* const* p = base; p != nullptr && *p != nullptr; ++p) {
    std::string_view entry = *p;
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : ours) replaced = replaced || name == key;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [key, value] : ours) env.push_back(std::string(key) + "=" + value);
  return env;
}

}  // namespace strata::launcher
