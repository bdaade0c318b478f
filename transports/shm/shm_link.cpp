#include "transports/shm/shm_link.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "strata/error.hpp"

namespace strata {

namespace {
constexpr uint64_t kSegMagic = 0x5354524154415348ull;  // "STRATASH"
constexpr size_t kHeaderBytes = 4096;
constexpr uint64_t kAlign = 64;  // every transfer starts 64-byte aligned in the FIFO

struct SegHeader {
  uint64_t magic;
  uint64_t nrings;
  uint64_t stride;
  uint64_t total;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

[[noreturn]] void sys_fail(const std::string& what) { throw SystemError(what + ": " + std::strerror(errno)); }
}  // namespace

std::shared_ptr<ShmSegment> ShmSegment::create(const std::string& name, int nrings, size_t ring_bytes) {
  uint64_t stride = align_up(192 + ring_bytes, 4096);
  uint64_t total = kHeaderBytes + stride * static_cast<uint64_t>(nrings);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail("shm_open " + name);
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    ::close(fd);
    shm_unlink(name.c_str());
    sys_fail("ftruncate " + name);
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    sys_fail("mmap " + name);
  }
  auto seg = std::shared_ptr<ShmSegment>(new ShmSegment());
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = total;
  seg->owner_ = true;
  auto* h = static_cast<SegHeader*>(base);
  for (int i = 0; i < nrings; ++i) {
    auto* r = new (static_cast<char*>(base) + kHeaderBytes + stride * i) ShmRing();
    r->head.store(0, std::memory_order_relaxed);
    r->tail.store(0, std::memory_order_relaxed);
    r->capacity = ring_bytes;
  }
  h->nrings = static_cast<uint64_t>(nrings);
  h->stride = stride;
  h->total = total;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  return seg;
}

std::shared_ptr<ShmSegment> ShmSegment::open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail("shm_open " + name);
  struct stat st{};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderBytes)) {
    ::close(fd);
    throw SystemError("shared memory segment " + name + " is too small");
  }
  void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) sys_fail("mmap " + name);
  auto seg = std::shared_ptr<ShmSegment>(new ShmSegment());
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = static_cast<size_t>(st.st_size);
  auto* h = static_cast<SegHeader*>(base);
  if (h->magic != kSegMagic || h->total != seg->bytes_) throw SystemError("shared memory segment " + name + " is not Strata's");
  return seg;
}

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  if (base_) munmap(base_, bytes_);
}

ShmRing* ShmSegment::ring(int i) const {
  auto* h = static_cast<SegHeader*>(base_);
  return reinterpret_cast<ShmRing*>(static_cast<char*>(base_) + kHeaderBytes + h->stride * static_cast<uint64_t>(i));
}

int ShmSegment::nrings() const { return static_cast<int>(static_cast<SegHeader*>(base_)->nrings); }

void ShmSegment::unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

ShmLink::ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg,
                 std::shared_ptr<ShmSegment> in_seg)
    : Link(peer), out_(out), in_(in), out_seg_(std::move(out_seg)), in_seg_(std::move(in_seg)) {
  head_ = out_->head.load(std::memory_order_relaxed);
  tail_ = in_->tail.load(std::memory_order_relaxed);
}

void ShmLink::post_send(const void* buf, size_t bytes) {
  sends_.push_back({const_cast<char*>(static_cast<const char*>(buf)), bytes, 0, nullptr, 1});
}

void ShmLink::post_recv(void* buf, size_t bytes, ReduceFn reduce, size_t elem_size) {
  recvs_.push_back({static_cast<char*>(buf), bytes, 0, reduce, elem_size});
}

bool ShmLink::send_some() {
  bool moved = false;
  const uint64_t cap = out_->capacity;
  while (!sends_.empty()) {
    Transfer& t = sends_.front();
    uint64_t start = t.done == 0 ? align_up(head_, kAlign) : head_;
    uint64_t used = start - out_->tail.load(std::memory_order_acquire);
    if (used >= cap) break;
    uint64_t n = std::min<uint64_t>(cap - used, t.len - t.done);
    uint64_t pos = start % cap;
    uint64_t first = std::min(n, cap - pos);
    std::memcpy(out_->data() + pos, t.buf + t.done, first);
    if (n > first) std::memcpy(out_->data(), t.buf + t.done + first, n - first);
    head_ = start + n;
    out_->head.store(head_, std::memory_order_release);
    t.done += n;
    moved = true;
    if (t.done < t.len) break;
    sends_.pop_front();
  }
  return moved;
}

bool ShmLink::recv_some() {
  bool moved = false;
  const uint64_t cap = in_->capacity;
  while (!recvs_.empty()) {
    Transfer& t = recvs_.front();
    uint64_t start = t.done == 0 ? align_up(tail_, kAlign) : tail_;
    uint64_t head = in_->head.load(std::memory_order_acquire);
    if (head <= start) break;
    uint64_t n = std::min<uint64_t>(head - start, t.len - t.done);
    // A reduction consumes whole elements; the rest waits for the producer. Transfers
    // start aligned and the capacity is a multiple of 64, so no element straddles the wrap.
    if (t.reduce && t.done + n < t.len) n -= n % t.elem_size;
    if (n == 0) break;
    uint64_t pos = start % cap;
    uint64_t first = std::min(n, cap - pos);
    if (t.reduce) {
      t.reduce(t.buf + t.done, in_->data() + pos, first / t.elem_size);
      if (n > first) t.reduce(t.buf + t.done + first, in_->data(), (n - first) / t.elem_size);
    } else {
      std::memcpy(t.buf + t.done, in_->data() + pos, first);
      if (n > first) std::memcpy(t.buf + t.done + first, in_->data(), n - first);
    }
    tail_ = start + n;
    in_->tail.store(tail_, std::memory_order_release);
    t.done += n;
    moved = true;
    if (t.done < t.len) break;
    recvs_.pop_front();
  }
  return moved;
}

bool ShmLink::progress() {
  bool moved = send_some();
  moved |= recv_some();
  return moved;
}

}  // namespace strata
