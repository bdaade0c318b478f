#include "ground/device/ipc_handle.hpp"

#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "ground/fd_passing.hpp"
#include "strata/error.hpp"

namespace strata::device {

namespace {

// What travels as bytes; the fd (Type::fd) travels beside it.
struct Wire {
  uint32_t magic;
  uint8_t type;
  uint8_t kind;
  uint8_t pad[2];
  uint64_t length;
  uint8_t legacy[IpcHandle::kLegacyBytes];
};
constexpr uint32_t kMagic = 0x53444831;  // "SDH1"

}  // namespace

IpcHandle IpcHandle::from_fd(int fd, MemoryKind kind, uint64_t length) {
  IpcHandle h;
  h.type_ = Type::fd;
  h.kind_ = kind;
  h.length_ = length;
  h.fd_ = fd;
  return h;
}

IpcHandle IpcHandle::from_legacy(const void* bytes, MemoryKind kind, uint64_t length) {
  IpcHandle h;
  h.type_ = Type::legacy;
  h.kind_ = kind;
  h.length_ = length;
  std::memcpy(h.legacy_.data(), bytes, kLegacyBytes);
  return h;
}

IpcHandle::IpcHandle(IpcHandle&& o) noexcept
    : type_(std::exchange(o.type_, Type::none)), kind_(o.kind_), length_(o.length_), fd_(std::exchange(o.fd_, -1)),
      legacy_(o.legacy_) {}

IpcHandle& IpcHandle::operator=(IpcHandle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    type_ = std::exchange(o.type_, Type::none);
    kind_ = o.kind_;
    length_ = o.length_;
    fd_ = std::exchange(o.fd_, -1);
    legacy_ = o.legacy_;
  }
  return *this;
}

IpcHandle::~IpcHandle() {
  if (fd_ >= 0) ::close(fd_);
}

void send_handle(int sock, const IpcHandle& h) {
  if (h.type() == IpcHandle::Type::none) throw InvalidArgument("send_handle: the handle is empty");
  Wire w{};
  w.magic = kMagic;
  w.type = static_cast<uint8_t>(h.type());
  w.kind = static_cast<uint8_t>(h.kind());
  w.length = h.length();
  std::memcpy(w.legacy, h.legacy().data(), sizeof w.legacy);
  const int fd = h.fd();
  send_with_fds(sock, &w, sizeof w,
                h.type() == IpcHandle::Type::fd ? std::span<const int>(&fd, 1) : std::span<const int>());
}

IpcHandle recv_handle(int sock) {
  Wire w{};
  int fd = -1;
  const size_t nfd = recv_with_fds(sock, &w, sizeof w, std::span<int>(&fd, 1));
  IpcHandle owner = nfd ? IpcHandle::from_fd(fd, MemoryKind::host, 0) : IpcHandle();  // closes fd if refused below
  const bool kind_ok =
      w.kind == static_cast<uint8_t>(MemoryKind::host) || w.kind == static_cast<uint8_t>(MemoryKind::device);
  const bool fd_type = w.type == static_cast<uint8_t>(IpcHandle::Type::fd);
  const bool legacy_type = w.type == static_cast<uint8_t>(IpcHandle::Type::legacy);
  if (w.magic != kMagic || !kind_ok || !(fd_type || legacy_type) || (fd_type != (nfd == 1)))
    throw SystemError("recv_handle: the peer sent no device allocation handle (magic " + std::to_string(w.magic) +
                      ", type " + std::to_string(w.type) + ", kind " + std::to_string(w.kind) + ", " +
                      std::to_string(nfd) + " fds)");
  const auto kind = static_cast<MemoryKind>(w.kind);
  if (fd_type) return IpcHandle::from_fd(owner.release_fd(), kind, w.length);
  return IpcHandle::from_legacy(w.legacy, kind, w.length);
}

}  // namespace strata::device
