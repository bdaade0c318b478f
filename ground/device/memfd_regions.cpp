#include "ground/device/memfd_regions.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "ground/device/shared_host.hpp"
#include "strata/error.hpp"

namespace strata::device {

namespace {

std::string errno_text(const std::string& call) { return call + ": " + std::strerror(errno); }

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) throw InvalidArgument("cannot allocate " + std::to_string(bytes) + " bytes");
  return (bytes + page - 1) / page * page;
}

char* map_or_throw(int fd, size_t length, int prot, const char* what) {
  void* p = mmap(nullptr, length, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw SystemError(errno_text(std::string("mmap (") + what + ", " + std::to_string(length) + " bytes)"));
  return static_cast<char*>(p);
}

}  // namespace

uint64_t next_allocation_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

MemfdRegion::~MemfdRegion() {
  if (shadow && shadow != base) munmap(shadow, length);
  if (base && origin != Origin::registered) munmap(base, length);  // a registered mapping stays the user's
  if (fd >= 0) ::close(fd);
}

RegionRef MemfdRegions::map(int fd, size_t length, MemoryKind kind, Origin origin) {
  auto r = std::make_shared<MemfdRegion>();
  r->fd = fd;  // the region owns it from here, so a failure below closes it
  r->length = length;
  r->kind = kind;
  r->origin = origin;
  r->id = next_allocation_id();
  if (kind == MemoryKind::device) {
    r->base = map_or_throw(fd, length, PROT_NONE, "device memory's user mapping");
    r->shadow = map_or_throw(fd, length, PROT_READ | PROT_WRITE, "device memory's backend mapping");
  } else {
    r->base = r->shadow = map_or_throw(fd, length, PROT_READ | PROT_WRITE, "host memory");
  }
  regions_.insert(r->base, length, r);
  if (kind == MemoryKind::host && origin == Origin::allocated) index_shareable(r);
  return r;
}

void* MemfdRegions::alloc(size_t bytes, MemoryKind kind, Origin origin) {
  if (bytes == 0) return nullptr;
  const size_t length = page_round(bytes);
  int fd = memfd_create(kind == MemoryKind::device ? "strata-device" : "strata-host", MFD_CLOEXEC);
  if (fd < 0) throw SystemError(errno_text("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    const std::string why = errno_text("ftruncate (memfd of " + std::to_string(length) + " bytes)");
    ::close(fd);
    throw SystemError(why);
  }
  return map(fd, length, kind, origin)->base;
}

void* MemfdRegions::import_handle(const IpcHandle& h) {
  if (h.type() != IpcHandle::Type::fd || h.fd() < 0)
    throw InvalidArgument("import: the handle carries no file descriptor (a CUDA legacy handle, or empty)");
  struct stat st {};
  if (fstat(h.fd(), &st) != 0) throw SystemError(errno_text("fstat (imported handle)"));
  if (h.length() == 0 || static_cast<uint64_t>(st.st_size) < h.length())
    throw InvalidArgument("import: the handle says " + std::to_string(h.length()) + " bytes, its memory holds " +
                          std::to_string(st.st_size));
  int fd = fcntl(h.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw SystemError(errno_text("fcntl(F_DUPFD_CLOEXEC) (imported handle)"));
  return map(fd, h.length(), h.kind(), Origin::imported)->base;
}

RegionRef MemfdRegions::remove(const void* base, MemoryKind kind, Origin origin) {
  RegionRef r = find(base);
  if (!r || r->base != base || r->kind != kind || r->origin != origin) return nullptr;
  RegionRef gone = regions_.erase(base).value_or(nullptr);  // nullptr: another thread removed it first
  if (gone) unindex_shareable(gone.get());
  return gone;
}

RegionRef MemfdRegions::find(const void* p) const { return regions_.find(p).value_or(nullptr); }

IpcHandle MemfdRegions::export_handle(const void* base) const {
  RegionRef r = find(base);
  if (!r || r->base != base || r->origin != Origin::allocated)
    throw InvalidArgument(
        "export: " + address_text(base) +
        (r ? " is not the start of an allocation made in this process" : " is not memory this backend allocated"));
  int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw SystemError(errno_text("fcntl(F_DUPFD_CLOEXEC) (export)"));
  return IpcHandle::from_fd(fd, r->kind, r->length);
}

}  // namespace strata::device
