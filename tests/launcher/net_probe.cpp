// strata-net-probe BYTES: a rank program for the emulated-cluster tests, run under
// strata-run. Rank 0 listens on STRATA_ROOT (so the address must exist in its network
// namespace); every other rank connects to it (so it must be reachable from theirs) and
// sends BYTES, then rank 0 sends BYTES back to each. Receivers time their data from the
// first byte to the last, which is what a shaped link limits. Output, one line each:
//   rank 0:  "peer R ADDRESS"      the address rank R's connection came from
//            "up TOTAL SECONDS"    all bytes received from the other ranks together
//   rank R:  "down BYTES SECONDS"  the bytes received back from rank 0
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "strata-net-probe: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "strata-net-probe: %s is not set\n", name);
    std::exit(1);
  }
  return std::atoi(v);
}

sockaddr_in root_address() {
  const char* root = std::getenv("STRATA_ROOT");
  std::string s = root ? root : "";
  size_t colon = s.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos ||
      inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    std::fprintf(stderr, "strata-net-probe: bad STRATA_ROOT '%s'\n", s.c_str());
    std::exit(1);
  }
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(s.c_str() + colon + 1)));
  return a;
}

void send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("send");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void recv_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("recv");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Receives `each` bytes from every fd at once; returns first-byte and last-byte times.
std::pair<Clock::time_point, Clock::time_point> receive_from_all(const std::vector<int>& fds,
                                                                 uint64_t each) {
  std::vector<uint64_t> left(fds.size(), each);
  std::vector<char> buf(1 << 18);
  Clock::time_point first{}, last{};
  bool started = false;
  size_t open = each > 0 ? fds.size() : 0;
  while (open > 0) {
    std::vector<pollfd> p;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i)
      if (left[i] > 0) {
        p.push_back({fds[i], POLLIN, 0});
        which.push_back(i);
      }
    if (::poll(p.data(), p.size(), -1) < 0 && errno != EINTR) die("poll");
    for (size_t k = 0; k < p.size(); ++k) {
      if (p[k].revents == 0) continue;
      size_t i = which[k];
      ssize_t r = ::recv(fds[i], buf.data(), std::min<uint64_t>(buf.size(), left[i]), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) die("recv");
      last = Clock::now();
      if (!started) first = last, started = true;
      left[i] -= static_cast<uint64_t>(r);
      if (left[i] == 0) --open;
    }
  }
  return {first, last};
}

int run_root(int world, uint64_t bytes) {
  sockaddr_in addr = root_address();
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind STRATA_ROOT");
  if (::listen(lfd, 64) != 0) die("listen");
  std::vector<int> fds;
  for (int i = 1; i < world; ++i) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept(lfd, reinterpret_cast<sockaddr*>(&peer), &len);
    if (fd < 0) die("accept");
    int32_t rank = -1;
    recv_all(fd, reinterpret_cast<char*>(&rank), sizeof rank);
    char ip[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    std::printf("peer %d %s\n", rank, ip);
    fds.push_back(fd);
  }
  auto [first, last] = receive_from_all(fds, bytes);
  std::printf("up %llu %.6f\n", static_cast<unsigned long long>(bytes * fds.size()),
              seconds(first, last));
  std::fflush(stdout);
  // Back to everyone at once.
  std::vector<char> data(1 << 18, 'd');
  std::vector<uint64_t> left(fds.size(), bytes);
  for (;;) {
    std::vector<pollfd> p;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i)
      if (left[i] > 0) {
        p.push_back({fds[i], POLLOUT, 0});
        which.push_back(i);
      }
    if (p.empty()) break;
    if (::poll(p.data(), p.size(), -1) < 0 && errno != EINTR) die("poll");
    for (size_t k = 0; k < p.size(); ++k) {
      if (p[k].revents == 0) continue;
      size_t i = which[k];
      ssize_t w = ::send(fds[i], data.data(), std::min<uint64_t>(data.size(), left[i]),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (w <= 0) die("send");
      left[i] -= static_cast<uint64_t>(w);
    }
  }
  // Wait for each rank to close after it has everything, so no data is cut off.
  for (int fd : fds) {
    char c;
    while (::recv(fd, &c, 1, 0) > 0) {
    }
    ::close(fd);
  }
  return 0;
}

int run_client(int rank, uint64_t bytes) {
  sockaddr_in addr = root_address();
  int fd = -1;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
    if (Clock::now() > deadline) die("connect to STRATA_ROOT");
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int32_t r = rank;
  send_all(fd, reinterpret_cast<const char*>(&r), sizeof r);
  std::vector<char> data(1 << 18, 'u');
  for (uint64_t left = bytes; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, data.size()));
    send_all(fd, data.data(), n);
    left -= n;
  }
  auto [first, last] = receive_from_all({fd}, bytes);
  std::printf("down %llu %.6f\n", static_cast<unsigned long long>(bytes), seconds(first, last));
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: strata-net-probe BYTES (under strata-run)\n");
    return 2;
  }
  uint64_t bytes = std::strtoull(argv[1], nullptr, 10);
  int rank = env_int("STRATA_RANK"), world = env_int("STRATA_WORLD_SIZE");
  return rank == 0 ? run_root(world, bytes) : run_client(rank, bytes);
}
