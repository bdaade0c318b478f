#include "ground/fd_passing.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Room for kMaxFds descriptors, aligned as cmsghdr needs.
union ControlBuffer {
  char bytes[CMSG_SPACE(sizeof(int) * kMaxFds)];
  cmsghdr align;
};

}  // namespace

void send_with_fds(int sock, const void* data, size_t bytes, std::span<const int> fds) {
  if (bytes == 0 || fds.size() > kMaxFds)
    throw InvalidArgument("send_with_fds: " + std::to_string(bytes) + " bytes and " + std::to_string(fds.size()) +
                          " fds (at least 1 byte and at most " + std::to_string(kMaxFds) + " fds)");
  const char* p = static_cast<const char*>(data);
  bool fds_sent = fds.empty();
  while (bytes > 0) {
    iovec iov{const_cast<char*>(p), bytes};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ControlBuffer control{};
    if (!fds_sent) {
      msg.msg_control = control.bytes;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(errno_text("sendmsg (passing file descriptors)"));
    }
    fds_sent = true;  // they travel with the first byte sent
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

size_t recv_with_fds(int sock, void* data, size_t bytes, std::span<int> fds) {
  char* p = static_cast<char*>(data);
  size_t got_fds = 0;
  bool too_many = false;
  while (bytes > 0) {
    iovec iov{p, bytes};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ControlBuffer control{};
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(errno_text("recvmsg (passing file descriptors)"));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (got_fds < fds.size()) {
          fds[got_fds++] = fd;
        } else {
          ::close(fd);
          too_many = true;
        }
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) too_many = true;
    if (n == 0) {
      for (size_t i = 0; i < got_fds; ++i) ::close(fds[i]);
      throw SystemError("recvmsg (passing file descriptors): the peer closed the socket with " +
                        std::to_string(bytes) + " bytes still expected");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  if (too_many) {
    for (size_t i = 0; i < got_fds; ++i) ::close(fds[i]);
    throw SystemError("recvmsg (passing file descriptors): the peer sent more than " + std::to_string(fds.size()) +
                      " descriptors");
  }
  return got_fds;
}

}  // namespace strata
