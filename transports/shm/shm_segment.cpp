#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "ground/fnv1a.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
constexpr uint64_t kSegMagic = 0x5354524154415348ull;  // "STRATASH"
constexpr size_t kHeaderBytes = 4096;

struct SegHeader {
  uint64_t magic;
  uint64_t nrings;
  uint64_t stride;
  uint64_t total;
  int64_t pid;
  int64_t fd;          // the segment's fd in the owner
  uint64_t name_hash;  // of the name it was created under: what an opener checks it found
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

[[noreturn]] void sys_fail(const std::string& what) { throw SystemError(what + ": " + std::strerror(errno)); }
}  // namespace

size_t ShmSegment::stride(size_t ring_bytes) { return align_up(ShmRing::bytes(ring_bytes), 4096); }

std::shared_ptr<ShmSegment> ShmSegment::create(const std::string& name, int nrings, size_t ring_bytes) {
  const uint64_t stride = ShmSegment::stride(ring_bytes);
  uint64_t total = kHeaderBytes + stride * static_cast<uint64_t>(nrings);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail("shm_open " + name);
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    ::close(fd);
    shm_unlink(name.c_str());
    sys_fail("ftruncate " + name);
  }
  // Not populated: a ring's pages are touched when its pair connects (populate), so the
  // FIFOs of pairs that never talk cost nothing.
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ::close(fd);
    shm_unlink(name.c_str());
    sys_fail("mmap " + name);
  }
  auto seg = std::shared_ptr<ShmSegment>(new ShmSegment());
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = total;
  seg->owner_ = true;
  seg->fd_ = fd;  // kept open: peers open the segment, and prove they can open this process's files, with it
  auto* h = static_cast<SegHeader*>(base);
  for (int i = 0; i < nrings; ++i) {
    auto* r = new (static_cast<char*>(base) + kHeaderBytes + stride * i) ShmRing();
    r->head.store(0, std::memory_order_relaxed);
    r->tail.store(0, std::memory_order_relaxed);
    r->mapped_done.store(0, std::memory_order_relaxed);
    r->inline_tail.store(0, std::memory_order_relaxed);
    r->zerocopy_min.store(0, std::memory_order_relaxed);
    r->pushes_done.store(0, std::memory_order_relaxed);
    r->landings_closed.store(0, std::memory_order_relaxed);
    for (ShmLanding& l : r->landings) l.recv.store(0, std::memory_order_relaxed);
    r->capacity = ring_bytes;
  }
  h->nrings = static_cast<uint64_t>(nrings);
  h->stride = stride;
  h->total = total;
  h->pid = getpid();
  h->fd = fd;
  h->name_hash = fnv1a(name.data(), name.size());
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  return seg;
}

void ShmSegment::populate(int i) const {
  // A job's first 4 MiB through a FIFO otherwise paid two page faults per 4 KiB, on both
  // sides (docs/benchmarks.md, "Measured choices"). A kernel without MADV_POPULATE_WRITE (before 5.14) leaves
  // it to them.
  (void)madvise(ring(i), static_cast<SegHeader*>(base_)->stride, MADV_POPULATE_WRITE);
}

std::shared_ptr<ShmSegment> ShmSegment::open(const std::string& name, int owner_pid, int owner_fd, bool* by_proc) {
  int fd = -1;
  if (owner_pid > 0 && owner_fd >= 0)
    fd = ::open(("/proc/" + std::to_string(owner_pid) + "/fd/" + std::to_string(owner_fd)).c_str(), O_RDWR | O_CLOEXEC);
  if (by_proc) *by_proc = fd >= 0;
  if (fd < 0) fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail("shm_open " + name);
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderBytes)) {
    ::close(fd);
    throw SystemError("shared memory segment " + name + " is too small");
  }
  void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) sys_fail("mmap " + name);
  auto seg = std::shared_ptr<ShmSegment>(new ShmSegment());
  seg->dev_ = static_cast<uint64_t>(st.st_dev);
  seg->ino_ = static_cast<uint64_t>(st.st_ino);
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = static_cast<size_t>(st.st_size);
  auto* h = static_cast<SegHeader*>(base);
  if (h->magic != kSegMagic || h->total != seg->bytes_)
    throw SystemError("shared memory segment " + name + " is not Strata's");
  // A descriptor number the owner has closed and reused since it sent it leads elsewhere.
  if (h->name_hash != fnv1a(name.data(), name.size()))
    throw SystemError("shared memory segment " + name + ": /proc/" + std::to_string(owner_pid) + "/fd/" +
                      std::to_string(owner_fd) + " is another segment");
  return seg;
}

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  if (base_) munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

ShmRing* ShmSegment::ring(int i) const {
  auto* h = static_cast<SegHeader*>(base_);
  return reinterpret_cast<ShmRing*>(static_cast<char*>(base_) + kHeaderBytes + h->stride * static_cast<uint64_t>(i));
}

int ShmSegment::nrings() const { return static_cast<int>(static_cast<SegHeader*>(base_)->nrings); }
int ShmSegment::owner_pid() const { return static_cast<int>(static_cast<SegHeader*>(base_)->pid); }
int ShmSegment::owner_fd() const { return static_cast<int>(static_cast<SegHeader*>(base_)->fd); }

bool ShmSegment::can_open_owner_files() const {
  const std::string path = "/proc/" + std::to_string(owner_pid()) + "/fd/" + std::to_string(owner_fd());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool same =
      fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev_ && static_cast<uint64_t>(st.st_ino) == ino_;
  ::close(fd);
  return same;
}

void ShmSegment::unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

size_t shm_fifo_bytes(size_t rank_bytes, size_t ring_bytes, int host_peers) {
  const size_t share = rank_bytes / static_cast<size_t>(std::max(host_peers, 1)) / 4096 * 4096;
  return std::max<size_t>(4096, std::min(ring_bytes, share)) & ~size_t(63);
}

}  // namespace strata
