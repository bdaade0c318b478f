#include "transports/ipc/ipc_channel.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {

constexpr size_t kBytes = (sizeof(IpcChannel) + 4095) & ~size_t(4095);

IpcChannel* map_channel(int fd) {
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<IpcChannel*>(p);
}

}  // namespace

std::shared_ptr<IpcChannelMap> IpcChannelMap::create() {
  std::shared_ptr<IpcChannelMap> m(new IpcChannelMap);
  m->fd_ = memfd_create("strata-ipc-channel", MFD_CLOEXEC);
  if (m->fd_ < 0) throw SystemError(std::string("ipc: memfd_create: ") + std::strerror(errno));
  if (ftruncate(m->fd_, static_cast<off_t>(kBytes)) != 0)
    throw SystemError(std::string("ipc: ftruncate of the channel: ") + std::strerror(errno));
  if (!(m->channel_ = map_channel(m->fd_))) throw SystemError(std::string("ipc: mmap of the channel: ") + std::strerror(errno));
  // A fresh memfd is zeroed; the atomics start at 0 as they read.
  m->channel_->magic = IpcChannel::kMagic;
  return m;
}

std::shared_ptr<IpcChannelMap> IpcChannelMap::open(int fd, int peer) {
  std::shared_ptr<IpcChannelMap> m(new IpcChannelMap);
  m->fd_ = fd;
  const std::string who = "rank " + std::to_string(peer);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != kBytes)
    throw SystemError("ipc: the channel " + who + " passed is not one (" + std::to_string(st.st_size) + " bytes)");
  if (!(m->channel_ = map_channel(fd))) throw SystemError("ipc: mmap of the channel from " + who + ": " + std::strerror(errno));
  if (m->channel_->magic != IpcChannel::kMagic) throw SystemError("ipc: the channel " + who + " passed is not one (magic)");
  return m;
}

IpcChannelMap::~IpcChannelMap() {
  if (channel_) munmap(channel_, kBytes);
  if (fd_ >= 0) close(fd_);
}

}  // namespace strata
