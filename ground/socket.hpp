// Blocking-with-deadline TCP helpers used by the bootstrap and connection setup.
// (The data path uses non-blocking sockets directly: see transports/tcp.)
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace strata::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
Deadline deadline_after(double seconds);

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string str() const;  // "1.2.3.4:5" or "[::1]:5"
  uint16_t port() const;
  void set_port(uint16_t p);
};

// "host:port" (host may be a name, an IPv4 or a bracketed IPv6 address).
SockAddr parse_host_port(const std::string& s);
// The address of interface `ifname`, or when empty: the first non-loopback interface that
// is up, else loopback. Port 0.
SockAddr interface_address(const std::string& ifname);

Fd listen_on(const SockAddr& addr, int backlog = 1024);
SockAddr local_address(int fd);
// Retries refused connections until the deadline (the listener may not be up yet).
Fd connect_to(const SockAddr& addr, Deadline deadline);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Full transfers; throw SystemError on error, EOF or deadline. `what` names the peer.
void send_all(int fd, const void* buf, size_t n, Deadline deadline, const std::string& what);
void recv_all(int fd, void* buf, size_t n, Deadline deadline, const std::string& what);

// The first message on every connection Strata makes: it proves the job's secret and
// says who is calling and why.
enum class Role : int32_t { join = 1, control = 2, data = 3 };
struct Hello {
  uint64_t magic;
  uint8_t secret[16];
  uint64_t comm_tag;  // which communicator (world or a split) the connection is for
  int32_t rank;       // the caller's rank in that communicator
  int32_t nranks;
  Role role;
  int32_t index;  // data socket number
};
inline constexpr uint64_t kHelloMagic = 0x5354524154413031ull;  // "STRATA01"

Hello make_hello(const uint8_t secret[16], uint64_t comm_tag, int rank, int nranks, Role role,
                 int index);
// The first bytes a connection sent, read as a hello for this job (`secret`) and
// communicator (`comm_tag`): the hello, or nullopt with the reason in `why`. What the
// caller, rank and role say is for the caller to check.
std::optional<Hello> parse_hello(const void* bytes, size_t n, const uint8_t secret[16], uint64_t comm_tag,
                                 std::string* why);
// Accepts connections on `listen_fd` until one presents `secret` and `comm_tag`; others are
// closed (and logged). Each candidate gets at most a few seconds to send its hello.
std::pair<Fd, Hello> accept_authenticated(int listen_fd, const uint8_t secret[16],
                                          uint64_t comm_tag, Deadline deadline);

}  // namespace strata::net
