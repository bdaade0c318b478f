// Blocking-with-deadline TCP helpers used by the bootstrap and connection setup.
// (The data path uses non-blocking sockets directly: see transports/tcp.)
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

// The backlog asked for is as deep as the kernel allows (net.core.somaxconn caps it): a
// job of thousands of ranks may call one listener at once.
Fd listen_on(const SockAddr& addr, int backlog = 65535);
SockAddr local_address(int fd);
// Retries refused connections until the deadline (the listener may not be up yet), unless
// `listening` says it is: then a refusal means its process is gone, and throws at once.
Fd connect_to(const SockAddr& addr, Deadline deadline, bool listening = false);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Full transfers; throw SystemError on error, EOF or deadline. `what` names the peer.
void send_all(int fd, const void* buf, size_t n, Deadline deadline, const std::string& what);
void recv_all(int fd, void* buf, size_t n, Deadline deadline, const std::string& what);

// The first message on every connection Strata makes: it proves the job's secret and
// says who is calling and why.
// join: a rank to the bootstrap root; table: the root (or a rank passing it on) delivering
// the rank table; control, data: a pair's connections (core/connector); probe: a liveness
// check that the listener's process is still there, closed at once.
enum class Role : int32_t { join = 1, control = 2, data = 3, table = 4, probe = 5 };
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

// A connection whose hello was good, with its hello.
using Accepted = std::pair<Fd, Hello>;

// Why a connection's first bytes are refused, or ok.
enum class HelloVerdict { ok, short_hello, no_secret, other_communicator };
// The verdict on the first `n` bytes a connection sent: a whole Hello with the job's magic
// and secret (compared in constant time) and this communicator's tag; `*out` gets the
// hello when n is its size. Pure: the fuzzers call it too.
HelloVerdict check_hello(const void* bytes, size_t n, const uint8_t secret[16], uint64_t comm_tag, Hello* out);

// Accepts connections on a listening socket and hands out those that present the job's
// secret and this communicator's tag. Connections are taken concurrently, each with its own
// short deadline for its hello, so ones that say nothing (port scanners, health checks)
// hold up nothing. At most `max_pending` wait for their hello at once: beyond that, new
// connections stay in the kernel's backlog until a place frees, so a crowd of legitimate
// callers (hundreds of ranks joining at once) is slowed, never refused.
class Acceptor {
 public:
  static constexpr auto kHelloWait = std::chrono::seconds(2);
  static constexpr size_t kMaxPending = 64;  // the default; a root sizes it from the job

  // Sets `listen_fd` non-blocking; it must outlive the Acceptor.
  Acceptor(int listen_fd, const uint8_t secret[16], uint64_t comm_tag, size_t max_pending = kMaxPending);
  void set_max_pending(size_t n) { max_pending_ = std::max<size_t>(n, 1); }
  // The next connection that presents the secret and the tag, with its hello (the socket
  // is non-blocking). At `deadline` a TimeoutError saying what it waited for
  // (`waiting_for`) and what it refused meanwhile.
  Accepted next(Deadline deadline, const std::string& waiting_for);
  // Without blocking: accepts what waits, reads the hellos that arrived, and returns the
  // first connection whose hello is complete and good (an invalid Fd: none yet).
  Accepted poll_once();
  // What to poll() on to learn when poll_once has something to do.
  void wait_fds(std::vector<pollfd>& out) const;
  // "3 connections refused: 2 sent no hello within 2 s, ..."; "" when none.
  std::string refusals() const;

 private:
  struct Pending {
    Fd fd;
    SockAddr from;
    Deadline hello_by;
    Hello hello{};
    size_t got = 0;
  };
  void accept_waiting();
  void refuse(Pending& p, const std::string& why, size_t& count);
  // Refuses pending connections past their hello deadline; the earliest deadline left.
  Deadline expire(Clock::time_point now, Deadline wake);
  // The rest of its hello is in the socket, unread (this process was not polling).
  static bool hello_waiting(const Pending& p);
  // Reads pending connection i's hello; a good one is moved to `ready`.
  void read_hello(size_t i, Accepted& ready);
  int listen_fd_;
  uint8_t secret_[16];
  uint64_t tag_;
  size_t max_pending_;
  std::vector<Pending> pending_;
  size_t silent_ = 0, no_secret_ = 0, other_comm_ = 0, closed_ = 0;
};

// A listener and what it has taken so far, handed on whole from one owner to the next (the
// bootstrap waits on it for the table, then the communicator's connector takes it over),
// so no connection in the middle of its hello is dropped between the two.
struct Incoming {
  Fd listener;
  std::unique_ptr<Acceptor> acceptor;  // made by the first owner that accepts
  std::vector<Accepted> early;         // taken, hello good, for the next owner
  Incoming() = default;
  explicit Incoming(Fd fd) : listener(std::move(fd)) {}
  // The acceptor, made on first use for `secret` and `comm_tag`; at least `max_pending`.
  Acceptor& accept(const uint8_t secret[16], uint64_t comm_tag, size_t max_pending) {
    if (!acceptor) acceptor = std::make_unique<Acceptor>(listener.get(), secret, comm_tag, max_pending);
    acceptor->set_max_pending(max_pending);
    return *acceptor;
  }
};

}  // namespace strata::net
