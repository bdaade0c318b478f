#include "ground/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata::net {

namespace {
std::string errstr(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

int ms_left(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}
}  // namespace

Deadline deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
  inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
}

uint16_t SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
}

void SockAddr::set_port(uint16_t p) {
  if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(p);
  else reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(p);
}

SockAddr parse_host_port(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size())
    throw InvalidArgument("address '" + s + "' is not host:port");
  std::string host = s.substr(0, colon), port = s.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) throw InvalidArgument("cannot resolve '" + s + "': " + gai_strerror(rc));
  SockAddr a;
  std::memcpy(&a.ss, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

SockAddr interface_address(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw SystemError(errstr("getifaddrs"));
  SockAddr found, loopback;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)) continue;
    SockAddr a;
    a.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&a.ss, i->ifa_addr, a.len);
    bool is_lo = i->ifa_flags & IFF_LOOPBACK;
    // Prefer IPv4 when an interface has both.
    auto better = [&](const SockAddr& cur) { return cur.len == 0 || (cur.ss.ss_family == AF_INET6 && fam == AF_INET); };
    if (!ifname.empty()) {
      if (ifname == i->ifa_name && better(found)) found = a;
    } else if (is_lo) {
      if (better(loopback)) loopback = a;
    } else if (better(found)) {
      found = a;
    }
  }
  freeifaddrs(list);
  if (found.len) return found;
  if (!ifname.empty()) throw InvalidArgument("STRATA_SOCKET_IFNAME=" + ifname + ": no such interface with an address that is up");
  if (loopback.len) return loopback;
  throw SystemError("no network interface is up");
}

Fd listen_on(const SockAddr& addr, int backlog) {
  Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw SystemError(errstr("socket"));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0)
    throw SystemError(errstr(("bind " + addr.str()).c_str()));
  if (::listen(fd.get(), backlog) != 0) throw SystemError(errstr("listen"));
  return fd;
}

SockAddr local_address(int fd) {
  SockAddr a;
  a.len = sizeof a.ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) throw SystemError(errstr("getsockname"));
  return a;
}

Fd connect_to(const SockAddr& addr, Deadline deadline) {
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw SystemError(errstr("socket"));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    int err = errno;
    if ((err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ENOENT) || Clock::now() >= deadline)
      throw SystemError("connect to " + addr.str() + ": " + std::strerror(err));
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(100));
  }
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) throw SystemError(errstr("fcntl O_NONBLOCK"));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void wait_fd(int fd, short events, Deadline deadline, const std::string& what) {
  for (;;) {
    if (Clock::now() >= deadline) throw TimeoutError(-1, "timed out (STRATA_TIMEOUT) waiting for " + what);
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) throw SystemError(errstr("poll"));
  }
}

void send_all(int fd, const void* buf, size_t n, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      wait_fd(fd, POLLOUT, deadline, what);
    } else {
      throw SystemError("send to " + what + ": " + std::strerror(errno));
    }
  }
}

void recv_all(int fd, void* buf, size_t n, Deadline deadline, const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      throw SystemError("connection closed by " + what);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      wait_fd(fd, POLLIN, deadline, what);
    } else {
      throw SystemError("recv from " + what + ": " + std::strerror(errno));
    }
  }
}

Hello make_hello(const uint8_t secret[16], uint64_t comm_tag, int rank, int nranks, Role role, int index) {
  Hello h{};
  h.magic = kHelloMagic;
  std::memcpy(h.secret, secret, 16);
  h.comm_tag = comm_tag;
  h.rank = rank;
  h.nranks = nranks;
  h.role = role;
  h.index = index;
  return h;
}

// Constant time, so the comparison does not leak how much of a guess was right.
static bool same_secret(const uint8_t a[16], const uint8_t b[16]) {
  uint8_t diff = 0;
  for (int i = 0; i < 16; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::optional<Hello> parse_hello(const void* bytes, size_t n, const uint8_t secret[16], uint64_t comm_tag,
                                 std::string* why) {
  Hello h{};
  if (n != sizeof h) {
    *why = "a first message of " + std::to_string(n) + " bytes is not a hello";
    return std::nullopt;
  }
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kHelloMagic || !same_secret(h.secret, secret)) {
    *why = "it did not present this job's secret";
    return std::nullopt;
  }
  if (h.comm_tag != comm_tag) {
    *why = "it is for another communicator";
    return std::nullopt;
  }
  return h;
}

std::pair<Fd, Hello> accept_authenticated(int listen_fd, const uint8_t secret[16], uint64_t comm_tag,
                                          Deadline deadline) {
  for (;;) {
    wait_fd(listen_fd, POLLIN, deadline, "connections on " + local_address(listen_fd).str());
    SockAddr from;
    from.len = sizeof from.ss;
    Fd fd(::accept4(listen_fd, reinterpret_cast<sockaddr*>(&from.ss), &from.len, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      throw SystemError(errstr("accept"));
    }
    set_nodelay(fd.get());
    Hello h{};
    // A silent or slow client gets a short grace, so it cannot hold up the job.
    Deadline hello_deadline = std::min(deadline, deadline_after(5.0));
    try {
      recv_all(fd.get(), &h, sizeof h, hello_deadline, from.str());
    } catch (const Error& e) {  // silent, slow or gone: drop it and keep listening
      STRATA_WARN("refused connection from %s: no hello (%s)", from.str().c_str(), e.what());
      continue;
    }
    std::string why;
    if (!parse_hello(&h, sizeof h, secret, comm_tag, &why)) {
      STRATA_WARN("refused connection from %s: %s", from.str().c_str(), why.c_str());
      continue;
    }
    return {std::move(fd), h};
  }
}

}  // namespace strata::net
