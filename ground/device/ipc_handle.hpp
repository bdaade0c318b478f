// A handle to one allocation that another process of the node can map (Memory's
// export_handle / import_handle), and how it travels: the fixed-size description as
// bytes, the fd beside them with SCM_RIGHTS over an AF_UNIX socket.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "strata/device.hpp"

namespace strata::device {

class IpcHandle {
 public:
  enum class Type : uint8_t {
    none,
    fd,      // a file descriptor (memfd, or CUDA's cuMem POSIX fd): the default
    legacy,  // CUDA memory we did not allocate: cudaIpcMemHandle_t's 64 bytes
  };
  static constexpr size_t kLegacyBytes = 64;

  IpcHandle() = default;
  // Takes ownership of `fd`.
  static IpcHandle from_fd(int fd, MemoryKind kind, uint64_t length);
  static IpcHandle from_legacy(const void* bytes, MemoryKind kind, uint64_t length);

  IpcHandle(IpcHandle&& o) noexcept;
  IpcHandle& operator=(IpcHandle&& o) noexcept;
  IpcHandle(const IpcHandle&) = delete;
  IpcHandle& operator=(const IpcHandle&) = delete;
  ~IpcHandle();  // closes the fd

  Type type() const { return type_; }
  MemoryKind kind() const { return kind_; }
  uint64_t length() const { return length_; }  // bytes the importer maps
  int fd() const { return fd_; }               // -1 unless type() == fd
  const std::array<uint8_t, kLegacyBytes>& legacy() const { return legacy_; }
  int release_fd() { return std::exchange(fd_, -1); }  // the caller now owns it

 private:
  Type type_ = Type::none;
  MemoryKind kind_ = MemoryKind::device;
  uint64_t length_ = 0;
  int fd_ = -1;
  std::array<uint8_t, kLegacyBytes> legacy_{};
};

// Over an AF_UNIX socket (blocking; SystemError on failure, naming the call, or when the
// peer closed the socket). The handle sent stays the caller's.
void send_handle(int sock, const IpcHandle& handle);
IpcHandle recv_handle(int sock);

}  // namespace strata::device
