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
  if (!ifname.empty())
    throw InvalidArgument("STRATA_SOCKET_IFNAME=" + ifname + ": no such interface with an address that is up");
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

Fd connect_to(const SockAddr& addr, Deadline deadline, bool listening) {
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw SystemError(errstr("socket"));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    int err = errno;
    const bool not_yet = (err == ECONNREFUSED && !listening) || err == ETIMEDOUT || err == EAGAIN || err == ENOENT;
    if (!not_yet || Clock::now() >= deadline)
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

HelloVerdict check_hello(const void* bytes, size_t n, const uint8_t secret[16], uint64_t comm_tag, Hello* out) {
  if (n != sizeof(Hello)) return HelloVerdict::short_hello;
  Hello h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kHelloMagic || !same_secret(h.secret, secret)) return HelloVerdict::no_secret;
  if (h.comm_tag != comm_tag) return HelloVerdict::other_communicator;
  *out = h;
  return HelloVerdict::ok;
}

static std::string hello_wait_text() {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(Acceptor::kHelloWait).count()) + " s";
}

Acceptor::Acceptor(int listen_fd, const uint8_t secret[16], uint64_t comm_tag, size_t max_pending)
    : listen_fd_(listen_fd), tag_(comm_tag), max_pending_(std::max<size_t>(max_pending, 1)) {
  std::memcpy(secret_, secret, sizeof secret_);
  set_nonblocking(listen_fd_);
}

void Acceptor::refuse(Pending& p, const std::string& why, size_t& count) {
  STRATA_WARN("refused connection from %s: %s", p.from.str().c_str(), why.c_str());
  ++count;
  p.fd.reset();
}

void Acceptor::accept_waiting() {
  while (pending_.size() < max_pending_) {  // the rest wait in the kernel's backlog
    Pending p;
    p.from.len = sizeof p.from.ss;
    p.fd =
        Fd(::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&p.from.ss), &p.from.len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!p.fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throw SystemError(errstr("accept"));
    }
    set_nodelay(p.fd.get());
    p.hello_by = Clock::now() + kHelloWait;
    pending_.push_back(std::move(p));
  }
}

bool Acceptor::hello_waiting(const Pending& p) {
  Hello h;
  const size_t rest = sizeof h - p.got;
  return ::recv(p.fd.get(), &h, rest, MSG_DONTWAIT | MSG_PEEK) == static_cast<ssize_t>(rest);
}

Deadline Acceptor::expire(Clock::time_point now, Deadline wake) {
  for (Pending& p : pending_) {
    // A hello that arrived in time but was not read yet (the process was busy, or not
    // scheduled, for the wait: hundreds of ranks on a few cores) is read, not refused.
    if (now >= p.hello_by && !hello_waiting(p)) refuse(p, "no hello within " + hello_wait_text(), silent_);
    else wake = std::min(wake, p.hello_by);
  }
  std::erase_if(pending_, [](const Pending& p) { return !p.fd.valid(); });
  return wake;
}

void Acceptor::read_hello(size_t i, Accepted& ready) {
  Pending& p = pending_[i];
  ssize_t r = ::recv(p.fd.get(), reinterpret_cast<char*>(&p.hello) + p.got, sizeof p.hello - p.got, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (r <= 0) return refuse(p, "closed before its hello", closed_);
  p.got += static_cast<size_t>(r);
  if (p.got < sizeof p.hello) return;
  Hello h;
  switch (check_hello(&p.hello, p.got, secret_, tag_, &h)) {
    case HelloVerdict::ok: ready = {std::move(p.fd), h}; break;
    case HelloVerdict::other_communicator: refuse(p, "it is for another communicator", other_comm_); break;
    default: refuse(p, "it did not present this job's secret", no_secret_); break;
  }
}

void Acceptor::wait_fds(std::vector<pollfd>& out) const {
  if (pending_.size() < max_pending_) out.push_back({listen_fd_, POLLIN, 0});
  for (const Pending& p : pending_) out.push_back({p.fd.get(), POLLIN, 0});
}

Accepted Acceptor::poll_once() {
  Accepted ready{};
  expire(Clock::now(), Clock::now());
  accept_waiting();
  for (size_t i = 0; i < pending_.size() && !ready.first.valid(); ++i)
    if (pending_[i].fd.valid()) read_hello(i, ready);
  std::erase_if(pending_, [](const Pending& p) { return !p.fd.valid(); });
  return ready;
}

Accepted Acceptor::next(Deadline deadline, const std::string& waiting_for) {
  std::vector<pollfd> fds;
  for (;;) {
    if (auto got = poll_once(); got.first.valid()) return got;
    const auto now = Clock::now();
    const Deadline wake = expire(now, deadline);
    if (now >= deadline) {
      std::string refused = refusals();
      throw TimeoutError(-1, "timed out (STRATA_TIMEOUT) waiting for " + waiting_for +
                                 (refused.empty() ? "" : "; meanwhile " + refused));
    }
    fds.clear();
    wait_fds(fds);
    int rc = ::poll(fds.data(), fds.size(), ms_left(wake));
    if (rc < 0 && errno != EINTR) throw SystemError(errstr("poll"));
  }
}

std::string Acceptor::refusals() const {
  const size_t total = silent_ + no_secret_ + other_comm_ + closed_;
  if (total == 0) return "";
  std::string s = std::to_string(total) + " connection" + (total == 1 ? "" : "s") + " refused:";
  auto add = [&](size_t n, const char* what) {
    if (n) s += std::string(s.back() == ':' ? " " : ", ") + std::to_string(n) + " " + what;
  };
  add(silent_, ("sent no hello within " + hello_wait_text() + " (port scanners or health checks?)").c_str());
  add(no_secret_, "did not present the job's secret");
  add(other_comm_, "were for another communicator");
  add(closed_, "closed before their hello");
  return s;
}

}  // namespace strata::net
