#include "transports/shm/shm_link.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "ground/device/shared_host.hpp"
#include "ground/fnv1a.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "transports/streaming.hpp"

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
  int64_t pid;
  uint64_t probe_addr;
  int64_t fd;  // the segment's fd in the owner
  uint64_t name_hash;  // of the name it was created under: what an opener checks it found
};

// What a peer reads to prove it may read this process's memory.
const volatile uint64_t probe = ShmSegment::kProbeValue;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

[[noreturn]] void sys_fail(const std::string& what) { throw SystemError(what + ": " + std::strerror(errno)); }

void unmap(const PeerMappings::Mapping& m) {
  if (m.ptr) munmap(m.ptr, m.length);
}

// `length` bytes of the file a peer holds open as `fd`, mapped here through /proc (zero-copy
// reads, and writes into its landings). Populated now: later transfers use the pages again.
// nullptr on failure, `why` saying what failed.
char* map_peer_file(int pid, uint64_t fd, uint64_t length, bool writable, std::string& why) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int f = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  struct stat st {};
  const bool ok = f >= 0 && fstat(f, &st) == 0 && static_cast<uint64_t>(st.st_size) >= length;
  void* p = ok ? mmap(nullptr, length, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED | MAP_POPULATE, f, 0)
               : MAP_FAILED;
  const int err = errno;
  if (f >= 0) ::close(f);
  if (p != MAP_FAILED) return static_cast<char*>(p);
  why = path + ", " + std::to_string(length) + " bytes: " + (f >= 0 && !ok ? "it is smaller" : std::strerror(err));
  return nullptr;
}
}  // namespace

size_t ShmSegment::stride(size_t ring_bytes) { return align_up(ShmRing::kHeaderBytes + ring_bytes + ShmInline::kRingBytes, 4096); }

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
    r->large_done.store(0, std::memory_order_relaxed);
    r->inline_tail.store(0, std::memory_order_relaxed);
    r->direct_ok.store(0, std::memory_order_relaxed);
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
  h->probe_addr = reinterpret_cast<uint64_t>(&probe);
  h->fd = fd;
  h->name_hash = fnv1a(name.data(), name.size());
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  return seg;
}

void ShmSegment::populate(int i) const {
  // A job's first 4 MiB through a FIFO otherwise paid two page faults per 4 KiB, on both
  // sides (the first 60 calls of a 64 KiB all_reduce ran 100 us against 18 us later;
  // docs/benchmarks.md). A kernel without MADV_POPULATE_WRITE (before 5.14) leaves it to them.
  (void)madvise(ring(i), static_cast<SegHeader*>(base_)->stride, MADV_POPULATE_WRITE);
}

std::shared_ptr<ShmSegment> ShmSegment::open(const std::string& name, int owner_pid, int owner_fd, bool* by_proc) {
  int fd = -1;
  if (owner_pid > 0 && owner_fd >= 0)
    fd = ::open(("/proc/" + std::to_string(owner_pid) + "/fd/" + std::to_string(owner_fd)).c_str(), O_RDWR | O_CLOEXEC);
  if (by_proc) *by_proc = fd >= 0;
  if (fd < 0) fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
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
  seg->dev_ = static_cast<uint64_t>(st.st_dev);
  seg->ino_ = static_cast<uint64_t>(st.st_ino);
  seg->name_ = name;
  seg->base_ = base;
  seg->bytes_ = static_cast<size_t>(st.st_size);
  auto* h = static_cast<SegHeader*>(base);
  if (h->magic != kSegMagic || h->total != seg->bytes_) throw SystemError("shared memory segment " + name + " is not Strata's");
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
uint64_t ShmSegment::owner_probe_addr() const { return static_cast<SegHeader*>(base_)->probe_addr; }

int ShmSegment::owner_fd() const { return static_cast<int>(static_cast<SegHeader*>(base_)->fd); }

bool ShmSegment::can_open_owner_files() const {
  const std::string path = "/proc/" + std::to_string(owner_pid()) + "/fd/" + std::to_string(owner_fd());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool same = fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev_ && static_cast<uint64_t>(st.st_ino) == ino_;
  ::close(fd);
  return same;
}

void ShmSegment::unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

ShmLink::ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg,
                 std::shared_ptr<ShmSegment> in_seg)
    : Link(peer),
      out_(out),
      in_(in),
      out_seg_(std::move(out_seg)),
      in_seg_(std::move(in_seg)),
      held_(static_cast<size_t>(settings::integer("STRATA_IPC_CACHE_ENTRIES"))),
      landings_(static_cast<size_t>(settings::integer("STRATA_IPC_CACHE_ENTRIES"))) {
  // The ring we write, mapped now rather than page by page by the first transfers (the
  // owner populates it in its own mapping); a kernel without MADV_POPULATE_WRITE (before
  // 5.14) leaves it to them.
  (void)madvise(out_, ShmRing::kHeaderBytes + out_->capacity + ShmInline::kRingBytes, MADV_POPULATE_WRITE);
  head_ = out_->head.load(std::memory_order_relaxed);
  peer_tail_ = out_->tail.load(std::memory_order_relaxed);
  tail_ = in_->tail.load(std::memory_order_relaxed);
  peer_pid_ = out_seg_->owner_pid();
  direct_min_ = static_cast<size_t>(settings::integer("STRATA_SHM_DIRECT_BYTES"));
  // Prove we may read the peer's memory (ptrace rules, containers); tell the peer through
  // the ring it writes to, before any transfer, so both sides choose the same protocol.
  uint64_t got = 0;
  iovec local{&got, sizeof got}, remote{reinterpret_cast<void*>(out_seg_->owner_probe_addr()), sizeof got};
  we_read_direct_ = direct_min_ > 0 && process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0) == sizeof got &&
                    got == ShmSegment::kProbeValue;
  in_->direct_ok.store(we_read_direct_ ? 1 : 0, std::memory_order_release);
  // Zero-copy: the sender follows what we publish, so the two ends always agree.
  const auto zc = static_cast<uint64_t>(settings::integer("STRATA_SHM_ZEROCOPY_BYTES"));
  zerocopy_min_ = zc > 0 && out_seg_->can_open_owner_files() ? std::max<uint64_t>(zc, ShmInline::kMaxBytes + 1) : 0;
  in_->zerocopy_min.store(zerocopy_min_, std::memory_order_release);
  // Writing into the peer's memory needs what reading it in place needs: opening its files.
  push_ = zerocopy_min_ > 0 && settings::integer("STRATA_SHM_ZEROCOPY_PUSH") != 0;
  stream_min_ = static_cast<size_t>(settings::integer("STRATA_SHM_STREAM_BYTES"));
  if (stream_min_) stream_tmp_.resize(64 << 10);
  if (we_read_direct_) staging_.resize(256 << 10);
  // Forwards only without direct reads: a peer reading our memory could read a forward's
  // bytes before they are reduced. FIFO writes of 4 KiB or more stream when asked.
  declare_caps({.forwards_reductions = direct_min_ == 0,
                .streaming_stores = true,
                .memory = {MemoryKind::host},
                .needs_registration = false});
  if (caps().forwards_reductions) forward_tmp_.resize(256 << 10);  // in L2; 64 KiB pieces measured 10-20% slower
}

void ShmLink::abandon() { in_->landings_closed.store(1, std::memory_order_release); }

ShmLink::~ShmLink() {
  abandon();
  held_.clear(unmap);
  landings_.clear(unmap);
}

namespace {
bool headed(const ShmRing* receiver, bool direct, size_t bytes) {
  const uint64_t min = receiver->zerocopy_min.load(std::memory_order_acquire);
  return !direct && min > 0 && bytes >= min;
}
}  // namespace

// The shareable allocation a headed send's bytes lie in is looked up once, here (a forward
// polls until its bytes are reduced before its header goes).
void ShmLink::head_send(Transfer& t) const {
  t.headed = headed(out_, t.direct, t.len);
  if (t.headed) t.region = device::shareable_host_region(t.buf, t.len);
}

void ShmLink::post_send(const void* buf, size_t bytes) {
  Transfer t{const_cast<char*>(static_cast<const char*>(buf)), bytes, 0, {}};
  t.direct = direct_min_ > 0 && bytes >= direct_min_ && out_->direct_ok.load(std::memory_order_acquire);
  t.number = sends_posted_++;
  head_send(t);
  sends_.push_back(t);
}

void ShmLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  Transfer t{static_cast<char*>(buf), bytes, 0, reduce};
  t.direct = we_read_direct_ && bytes >= direct_min_;
  t.headed = headed(in_, t.direct, bytes);
  t.number = recvs_posted_++;
  if (reduce.forward) {
    Transfer slot{t.buf, bytes, 0, {}};
    slot.forward_slot = true;
    slot.number = sends_posted_++;
    head_send(slot);
    t.forward = sends_.push_back(slot);
  }
  recvs_.push_back(t);
  if (recvs_.size() <= ShmRing::kLandings) offer_landing(recvs_.at(recvs_.front_index() + recvs_.size() - 1));
}

// Push (STRATA_SHM_ZEROCOPY_PUSH): the two-rank forward's receiver would otherwise read the
// reduced half back from the sender's destination, 1.5 reads of the buffer a rank instead
// of 1; out of place that two-shot ran 0.67-0.89x memcpy where in place ran 0.85-1.09x.
// The sender writes each reduced piece into both destinations while it is in cache:
// 1.05-1.12x reading back (docs/benchmarks.md, "Zero-copy").
void ShmLink::offer_landing(Transfer& t) {
  if (!push_ || !t.headed || t.reduce) return;
  t.region = device::shareable_host_region(t.buf, t.len);
  if (!t.region) return;
  ShmLanding& l = in_->landing(t.number);
  l.recv.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  l.fd.store(static_cast<uint64_t>(t.region->fd), std::memory_order_relaxed);
  l.id.store(t.region->id, std::memory_order_relaxed);
  l.offset.store(static_cast<uint64_t>(t.buf - t.region->base), std::memory_order_relaxed);
  l.length.store(t.region->length, std::memory_order_relaxed);
  l.bytes.store(t.len, std::memory_order_relaxed);
  l.recv.store(t.number + 1, std::memory_order_release);
}

void ShmLink::take_landing(Transfer& f) {
  if (!push_ || !f.headed || f.announced || f.push_to || out_->landings_closed.load(std::memory_order_acquire)) return;
  ShmLanding& l = out_->landing(f.number);
  const uint64_t before = l.recv.load(std::memory_order_acquire);
  const uint64_t fd = l.fd.load(std::memory_order_relaxed), id = l.id.load(std::memory_order_relaxed);
  const uint64_t offset = l.offset.load(std::memory_order_relaxed), length = l.length.load(std::memory_order_relaxed);
  const uint64_t bytes = l.bytes.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (before != f.number + 1 || l.recv.load(std::memory_order_relaxed) != before) return;  // not offered (yet)
  if (id == 0 || bytes != f.len || offset > length || bytes > length - offset) return;
  // Forwards run one at a time, as receives do: an evicted mapping's writer is over.
  const uint64_t seq = pushes_taken_++;
  landings_.release(seq, unmap);
  bool held = false;
  std::string why;
  const PeerMappings::Mapping& m =
      landings_.use(id, length, seq, held, [&] { return map_peer_file(peer_pid_, fd, length, true, why); });
  if (!m.ptr) {  // the peer reads the forward from our memory instead, now and from now on
    push_ = false;
    return;
  }
  f.push_to = m.ptr + offset;
}

bool ShmLink::finish_push(Transfer& f) {
  if (f.ready < f.len) return false;
  if (!f.announced) {
    ZeroCopyHeader h{};
    h.mapped = 2;
    h.length = f.len;
    if (fifo_put(reinterpret_cast<const char*>(&h), sizeof h, true, true) == 0) return false;
    f.announced = true;
  }
  out_->pushes_done.store(++pushes_sent_, std::memory_order_release);
  f.region.reset();
  return true;
}

bool ShmLink::announce(Transfer& t) {
  const device::RegionRef& r = t.region;  // held, so its fd stays open until the peer has read it all
  ZeroCopyHeader h{};
  if (r) h = {1, static_cast<uint64_t>(r->fd), r->id, static_cast<uint64_t>(t.buf - r->base), r->length, {}};
  if (fifo_put(reinterpret_cast<const char*>(&h), sizeof h, true, true) == 0) return false;
  t.announced = true;
  if (r) {
    t.mapped = true;
    t.seq = ++direct_sent_;
  }
  return true;
}

bool ShmLink::take_header(Transfer& t) {
  ZeroCopyHeader h{};
  if (fifo_read(reinterpret_cast<char*>(&h), sizeof h, 0, {}) == 0) return false;
  t.announced = true;
  if (h.mapped == 2) {
    if (!t.region || h.length != t.len)
      throw InternalError("shm: rank " + std::to_string(peer()) + " wrote " + std::to_string(h.length) +
                          " bytes into a receive of " + std::to_string(t.len) + (t.region ? "" : " that offered no landing"));
    t.pushed = true;
    t.seq = ++pushes_seen_;
  } else if (h.mapped) {
    t.mapped = true;
    t.src = peer_bytes(h, t.len);
  }
  return true;
}

const char* ShmLink::peer_bytes(const ZeroCopyHeader& h, size_t len) {
  auto who = [&] { return "rank " + std::to_string(peer()); };
  if (h.id == 0 || h.offset > h.length || len > h.length - h.offset)
    throw PeerError(peer(), who() + " named " + std::to_string(len) + " bytes at offset " + std::to_string(h.offset) +
                                " of an allocation of " + std::to_string(h.length));
  // Receives run one at a time: an evicted mapping's reader is over.
  const uint64_t seq = mapped_recvs_++;
  held_.release(seq, unmap);
  bool held = false;
  const PeerMappings::Mapping& m = held_.use(h.id, h.length, seq, held, [&] {
    std::string why;
    char* p = map_peer_file(peer_pid_, h.fd, h.length, false, why);
    if (!p) throw PeerError(peer(), who() + " is unreachable: mapping its buffer (" + why + ") failed");
    return p;
  });
  return m.ptr + h.offset;
}

// One piece per call, so the engine keeps every other link of the round moving too.
void ShmLink::mapped_read(Transfer& t) {
  constexpr size_t kPieceBytes = 1 << 20;
  const size_t n = std::min(kPieceBytes, t.len - t.done);
  const char* src = t.src + t.done;
  const bool stream = stream_min_ && t.len >= stream_min_;
  Transfer* f = t.forward != Transfer::kNoForward ? &sends_.at(t.forward) : nullptr;
  if (f && t.done == 0) take_landing(*f);
  if (f && f->push_to) {
    // Each 64 KiB reduced is copied into the peer's landing while it is in L1/L2 (in a
    // two-thread model of the pair 0.78-1.02x memcpy, against 0.74-0.99x with whole 1 MiB
    // pieces), streamed as the receives' copies are: with plain stores each line of the
    // landing was first read from memory, and pushing measured 0.89-0.94x of reading back
    // (docs/benchmarks.md).
    // The peer closes its landings when its call fails: checked before each piece, so a
    // rank stopped and resumed writes at most the piece it was in.
    constexpr size_t kSubBytes = 64 << 10;
    for (size_t k = 0; k < n; k += kSubBytes) {
      const size_t m = std::min(kSubBytes, n - k);
      t.reduce.apply(t.buf, t.done + k, src + k, m);
      if (out_->landings_closed.load(std::memory_order_acquire)) continue;
      if (stream) copy_streaming(f->push_to + t.done + k, t.buf + t.done + k, m);
      else std::memcpy(f->push_to + t.done + k, t.buf + t.done + k, m);
    }
  } else if (t.reduce && stream && t.reduce.local != t.buf && !f) {
    reduce_streaming(t.reduce, t.buf, t.done, src, n, stream_tmp_);
  } else if (t.reduce) {
    t.reduce.apply(t.buf, t.done, src, n);
  } else if (stream) {
    copy_streaming(t.buf + t.done, src, n);
  } else {
    std::memcpy(t.buf + t.done, src, n);
  }
  t.done += n;
  if (f) f->ready = t.done;
}

size_t ShmLink::fifo_put(const char* bytes, size_t want, bool starts, bool whole) {
  const uint64_t cap = out_->capacity;
  uint64_t start = starts ? align_up(head_, kAlign) : head_;
  // The consumer's tail is read only when the last value seen leaves too little room:
  // reading it every message would pull its cache line over from the consumer's core
  // (and make the consumer's next store to it miss) for every small message.
  uint64_t used = start - peer_tail_;
  if (used >= cap || cap - used < want) {
    peer_tail_ = out_->tail.load(std::memory_order_acquire);
    used = start - peer_tail_;
  }
  if (used >= cap) return 0;
  uint64_t n = std::min<uint64_t>(cap - used, want);
  if (whole && n < want) return 0;
  const bool stream = streaming_stores() && n >= 4096;
  out_->runs(start, n, [&](char* ring, uint64_t off, uint64_t len) __attribute__((always_inline)) {
    if (stream) copy_streaming(ring, bytes + off, len);
    else std::memcpy(ring, bytes + off, len);
  });
  head_ = start + n;
  out_->head.store(head_, std::memory_order_release);
  return n;
}

size_t ShmLink::fifo_write(const char* src, size_t len, size_t done) {
  // Descriptors go in whole.
  // Published a piece at a time, so the receiver starts copying out while the rest goes
  // in: one-way 4-16 MiB transfers ran 1.7x faster than with whole-message writes.
  constexpr size_t kPieceBytes = 256 << 10;
  return fifo_put(src + done, std::min(kPieceBytes, len - done), done == 0, done == 0 && len <= sizeof(Descriptor));
}

// Inlined: these run for every FIFO piece received.
[[gnu::always_inline]] inline ShmLink::FifoSpan ShmLink::fifo_readable(size_t len, size_t done, size_t elem, size_t most) {
  const uint64_t start = done == 0 ? align_up(tail_, kAlign) : tail_;
  const uint64_t head = in_->head.load(std::memory_order_acquire);
  if (head <= start) return {start, 0};
  uint64_t n = std::min<uint64_t>({head - start, len - done, most});
  // A reduction consumes whole elements; the rest waits for the producer. Transfers
  // start aligned and the capacity is a multiple of 64, so no element straddles the wrap.
  if (elem > 1 && done + n < len) n -= n % elem;
  return {start, n};
}

[[gnu::always_inline]] inline void ShmLink::fifo_consumed(const FifoSpan& s) {
  tail_ = s.start + s.n;
  in_->tail.store(tail_, std::memory_order_release);
}

size_t ShmLink::fifo_read(char* dst, size_t len, size_t done, const Reduction& reduce) {
  const FifoSpan s = fifo_readable(len, done, reduce ? reduce.elem_size : 1, len);
  if (s.n == 0) return 0;
  const bool stream = stream_min_ && len >= stream_min_;
  in_->runs(s.start, s.n, [&](const char* ring, uint64_t off, uint64_t n) __attribute__((always_inline)) {
    if (reduce && stream && reduce.local != dst) reduce_streaming(reduce, dst, done + off, ring, n, stream_tmp_);
    else if (reduce) reduce.apply(dst, done + off, ring, n);
    else if (stream) copy_streaming(dst + done + off, ring, n);
    else std::memcpy(dst + done + off, ring, n);
  });
  fifo_consumed(s);
  return s.n;
}

namespace {
std::atomic_ref<uint64_t> line_flag(char* line) { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(line)); }
}  // namespace

bool ShmLink::inline_put(const char* src, size_t len) {
  constexpr uint64_t cap = ShmInline::kRingBytes, data = ShmInline::kLineData;
  const uint64_t bytes = ShmInline::lines(len) * 64;
  if (inline_head_ + bytes - peer_inline_tail_ > cap) {
    peer_inline_tail_ = out_->inline_tail.load(std::memory_order_acquire);
    if (inline_head_ + bytes - peer_inline_tail_ > cap) return false;
  }
  char* ring = out_->inline_data();
  for (uint64_t off = 0, pos = inline_head_; off < len; off += data, pos += 64) {
    char* line = ShmInline::line(ring, pos);
    std::memcpy(line + 8, src + off, std::min(data, len - off));
    line_flag(line).store(pos + 1, std::memory_order_release);
  }
  inline_head_ += bytes;
  return true;
}

bool ShmLink::inline_get(char* dst, size_t len, const Reduction& reduce) {
  constexpr uint64_t data = ShmInline::kLineData;
  char* ring = in_->inline_data();
  const uint64_t end = inline_tail_ + ShmInline::lines(len) * 64;
  for (uint64_t pos = inline_tail_; pos < end; pos += 64)
    if (line_flag(ShmInline::line(ring, pos)).load(std::memory_order_acquire) != pos + 1) return false;
  // 56 is a multiple of every element size: no element straddles two lines.
  for (uint64_t off = 0, pos = inline_tail_; off < len; off += data, pos += 64) {
    const char* line = ShmInline::line(ring, pos) + 8;
    const size_t n = std::min(data, len - off);
    if (reduce) reduce.apply(dst, off, line, n);
    else std::memcpy(dst + off, line, n);
  }
  inline_tail_ = end;
  in_->inline_tail.store(inline_tail_, std::memory_order_release);
  return true;
}

bool ShmLink::send_some() {
  bool moved = false;
  while (!sends_.empty()) {
    Transfer& t = sends_.front();
    if (t.push_to) {
      if (!finish_push(t)) break;
      moved = true;
      sends_.pop_front();
      continue;
    }
    if (t.headed && !t.announced) {
      // A forward goes mapped only once it is all reduced: the peer may read it at once.
      if (t.forward_slot && t.ready < t.len && t.region) break;
      if (!announce(t)) break;
      moved = true;
    }
    if (t.mapped) {
      if (out_->large_done.load(std::memory_order_acquire) < t.seq) break;
      t.region.reset();
    } else if (t.forward_slot && t.len <= ShmInline::kMaxBytes) {
      if (t.ready < t.len || !inline_put(t.buf, t.len)) break;  // once the receive has reduced it all
      moved = true;
    } else if (t.forward_slot) {
      // What the receive reduced while this was not yet next (or the FIFO was full), from
      // the destination; the receive forwards the rest itself, from cache.
      if (t.done < t.ready) {
        size_t n = fifo_put(t.buf + t.done, t.ready - t.done, t.done == 0, false);
        t.done += n;
        moved |= n > 0;
      }
      if (t.done < t.len) break;
    } else if (t.direct) {
      if (!t.announced) {
        Descriptor d{reinterpret_cast<uint64_t>(t.buf), t.len};
        if (fifo_write(reinterpret_cast<const char*>(&d), sizeof d, 0) == 0) break;
        t.announced = true;
        t.seq = ++direct_sent_;
        moved = true;
      }
      // The buffer must stay untouched until the peer has read it all.
      if (out_->large_done.load(std::memory_order_acquire) < t.seq) break;
    } else if (t.len <= ShmInline::kMaxBytes) {
      if (!inline_put(t.buf, t.len)) break;
      moved = true;
    } else {
      size_t n = fifo_write(t.buf, t.len, t.done);
      if (n == 0) break;
      t.done += n;
      moved = true;
      if (t.done < t.len) continue;
    }
    sends_.pop_front();
  }
  return moved;
}

// One piece per call, so the engine keeps every other link of the round moving too.
bool ShmLink::direct_read(Transfer& t) {
  size_t n = std::min(staging_.size(), t.len - t.done);
  char* into = t.reduce ? staging_.data() : t.buf + t.done;
  size_t got = 0;
  while (got < n) {
    iovec local{into + got, n - got}, remote{reinterpret_cast<void*>(t.remote + t.done + got), n - got};
    ssize_t r = process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      throw PeerError(peer(), "rank " + std::to_string(peer()) + " is unreachable: reading its memory failed: " +
                                  std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  if (t.reduce) t.reduce.apply(t.buf, t.done, staging_.data(), n);
  t.done += n;
  return true;
}

// A forwarding receive: reduce a cache-sized piece, put it in the peer's FIFO when the
// forward is the next send and has caught up, and write it to the destination.
bool ShmLink::reduce_forward(Transfer& t) {
  const Reduction& r = t.reduce;
  const FifoSpan s = fifo_readable(t.len, t.done, r.elem_size, forward_tmp_.size());
  if (s.n == 0) return false;
  const uint64_t n = s.n;
  Transfer& f = sends_.at(t.forward);  // stays put: sends_ only pops until f is done
  // The sends before the forward (and its header), so it can go from cache.
  if (sends_.front_index() != t.forward || (f.headed && !f.announced)) send_some();
  char* tmp = forward_tmp_.data();
  in_->runs(s.start, n, [&](const char* ring, uint64_t off, uint64_t len) __attribute__((always_inline)) {
    r.fn(tmp + off, r.local + t.done + off, ring, len / r.elem_size);
  });
  fifo_consumed(s);
  if (sends_.front_index() == t.forward && f.done == t.done && (!f.headed || f.announced) && !f.mapped)
    f.done += fifo_put(tmp, n, f.done == 0, false);
  // Nothing reads the destination again (the forward went from tmp): non-temporal stores
  // skip reading its lines from memory first, whatever the size.
  if (stream_min_) copy_streaming(t.buf + t.done, tmp, n);
  else std::memcpy(t.buf + t.done, tmp, n);
  t.done += n;
  f.ready = t.done;
  return true;
}

bool ShmLink::recv_some() {
  bool moved = false;
  while (!recvs_.empty()) {
    Transfer& t = recvs_.front();
    if (t.headed && !t.announced) {
      if (!take_header(t)) break;
      moved = true;
    }
    if (t.pushed) {
      if (in_->pushes_done.load(std::memory_order_acquire) < t.seq) break;
      t.done = t.len;
      t.region.reset();
      moved = true;
    } else if (t.mapped) {
      mapped_read(t);
      moved = true;
      if (t.done < t.len) break;
      in_->large_done.fetch_add(1, std::memory_order_release);
    } else if (!t.direct && t.len <= ShmInline::kMaxBytes) {
      if (!inline_get(t.buf, t.len, t.reduce)) break;
      moved = true;
      if (t.forward != Transfer::kNoForward) sends_.at(t.forward).ready = t.len;
    } else if (t.forward != Transfer::kNoForward) {
      if (!reduce_forward(t)) break;
      moved = true;
      if (t.done < t.len) continue;
    } else if (t.direct) {
      if (!t.announced) {
        Descriptor d{};
        if (fifo_read(reinterpret_cast<char*>(&d), sizeof d, 0, {}) == 0) break;
        if (d.len != t.len)
          throw InternalError("shm: rank " + std::to_string(peer()) + " sent " + std::to_string(d.len) +
                              " bytes where " + std::to_string(t.len) + " were expected (plans disagree)");
        t.remote = d.addr;
        t.announced = true;
      }
      moved |= direct_read(t);
      if (t.done < t.len) break;
      in_->large_done.fetch_add(1, std::memory_order_release);
    } else {
      size_t n = fifo_read(t.buf, t.len, t.done, t.reduce);
      if (n == 0) break;
      t.done += n;
      moved = true;
      if (t.done < t.len) break;
    }
    recvs_.pop_front();
    // The receive that has just become the kLandings-th oldest (each is offered once: when
    // posted, or when it reaches that place).
    if (recvs_.size() >= ShmRing::kLandings) offer_landing(recvs_.at(recvs_.front_index() + ShmRing::kLandings - 1));
  }
  return moved;
}

bool ShmLink::progress() {
  bool moved = send_some();
  moved |= recv_some();
  return moved;
}

}  // namespace strata
