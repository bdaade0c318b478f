#include "transports/shm/shm_zerocopy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "ground/device/shared_host.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "transports/streaming.hpp"

namespace strata {

namespace {
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
  void* p =
      ok ? mmap(nullptr, length, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED | MAP_POPULATE, f, 0) : MAP_FAILED;
  const int err = errno;
  if (f >= 0) ::close(f);
  if (p != MAP_FAILED) return static_cast<char*>(p);
  why = path + ", " + std::to_string(length) + " bytes: " + (f >= 0 && !ok ? "it is smaller" : std::strerror(err));
  return nullptr;
}
}  // namespace

ShmZeroCopy::ShmZeroCopy(int peer, const ShmSegment& peer_segment, ShmProducer& out, ShmConsumer& in)
    : peer_(peer),
      peer_pid_(peer_segment.owner_pid()),
      out_(out),
      in_(in),
      held_(static_cast<size_t>(settings::integer("STRATA_IPC_CACHE_ENTRIES"))),
      landings_(static_cast<size_t>(settings::integer("STRATA_IPC_CACHE_ENTRIES"))) {
  const auto zc = static_cast<uint64_t>(settings::integer("STRATA_SHM_ZEROCOPY_BYTES"));
  zerocopy_min_ = zc > 0 && peer_segment.can_open_owner_files() ? std::max<uint64_t>(zc, ShmInline::kMaxBytes + 1) : 0;
  in_.ring()->zerocopy_min.store(zerocopy_min_, std::memory_order_release);
  // Writing into the peer's memory needs what reading it in place needs: opening its files.
  push_ = zerocopy_min_ > 0 && settings::integer("STRATA_SHM_ZEROCOPY_PUSH") != 0;
}

ShmZeroCopy::~ShmZeroCopy() {
  held_.clear(unmap);
  landings_.clear(unmap);
}

// The shareable allocation a headed send's bytes lie in is looked up once, here (a forward
// polls until its bytes are reduced before its header goes).
void ShmZeroCopy::choose_send(ShmTransfer& t, ShmMode fallback) const {
  const uint64_t min = out_.ring()->zerocopy_min.load(std::memory_order_acquire);
  t.headed = min > 0 && t.len >= min;
  if (t.headed) t.region = device::shareable_host_region(t.buf, t.len);
  t.mode = t.region ? ShmMode::mapped : fallback;
}

void ShmZeroCopy::choose_recv(ShmTransfer& t) const { t.headed = zerocopy_min_ > 0 && t.len >= zerocopy_min_; }

void ShmZeroCopy::close_landings() { in_.ring()->landings_closed.store(1, std::memory_order_release); }

// Push (STRATA_SHM_ZEROCOPY_PUSH): the two-rank forward's receiver would otherwise read the
// reduced half back from the sender's destination, 1.5 reads of the buffer a rank instead
// of 1. The sender writes each reduced piece into both destinations while it is in cache
// (docs/benchmarks.md, "Zero-copy" and "Measured choices").
void ShmZeroCopy::offer_landing(ShmTransfer& t) {
  if (!push_ || !t.headed || t.reduce) return;
  t.region = device::shareable_host_region(t.buf, t.len);
  if (!t.region) return;
  ShmLanding& l = in_.ring()->landing(t.number);
  l.recv.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  l.fd.store(static_cast<uint64_t>(t.region->fd), std::memory_order_relaxed);
  l.id.store(t.region->id, std::memory_order_relaxed);
  l.offset.store(static_cast<uint64_t>(t.buf - t.region->base), std::memory_order_relaxed);
  l.length.store(t.region->length, std::memory_order_relaxed);
  l.bytes.store(t.len, std::memory_order_relaxed);
  l.recv.store(t.number + 1, std::memory_order_release);
}

void ShmZeroCopy::take_landing(ShmTransfer& f) {
  ShmRing* ring = out_.ring();
  if (!push_ || !f.headed || f.announced || f.push_to || ring->landings_closed.load(std::memory_order_acquire)) return;
  ShmLanding& l = ring->landing(f.number);
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
  f.mode = ShmMode::pushed;
}

bool ShmZeroCopy::write_header(ShmTransfer& t) {
  // A forward goes mapped only once it is all reduced: the peer may read it at once.
  if (t.forward_slot && t.mode == ShmMode::mapped && t.ready < t.len) return false;
  const device::RegionRef& r = t.region;  // held, so its fd stays open until the peer has read it all
  ZeroCopyHeader h{};
  if (t.mode == ShmMode::mapped)
    h = {1, static_cast<uint64_t>(r->fd), r->id, static_cast<uint64_t>(t.buf - r->base), r->length, {}};
  if (out_.put(reinterpret_cast<const char*>(&h), sizeof h, true, true, false) == 0) return false;
  t.announced = true;
  if (t.mode == ShmMode::mapped) t.seq = ++mapped_sent_;
  return true;
}

bool ShmZeroCopy::read_header(ShmTransfer& t) {
  ZeroCopyHeader h{};
  if (in_.read(reinterpret_cast<char*>(&h), sizeof h, 0, {}) == 0) return false;
  t.announced = true;
  if (h.mapped == 2) {
    if (!t.region || h.length != t.len)
      throw InternalError("shm: rank " + std::to_string(peer_) + " wrote " + std::to_string(h.length) +
                          " bytes into a receive of " + std::to_string(t.len) +
                          (t.region ? "" : " that offered no landing"));
    t.mode = ShmMode::pushed;
    t.seq = ++pushes_seen_;
  } else if (h.mapped) {
    t.mode = ShmMode::mapped;
    t.src = peer_bytes(h, t.len);
  }
  return true;
}

const char* ShmZeroCopy::peer_bytes(const ZeroCopyHeader& h, size_t len) {
  auto who = [&] { return "rank " + std::to_string(peer_); };
  if (h.id == 0 || h.offset > h.length || len > h.length - h.offset)
    throw PeerError(peer_, who() + " named " + std::to_string(len) + " bytes at offset " + std::to_string(h.offset) +
                               " of an allocation of " + std::to_string(h.length));
  // Receives run one at a time: an evicted mapping's reader is over.
  const uint64_t seq = mapped_recvs_++;
  held_.release(seq, unmap);
  bool held = false;
  const PeerMappings::Mapping& m = held_.use(h.id, h.length, seq, held, [&] {
    std::string why;
    char* p = map_peer_file(peer_pid_, h.fd, h.length, false, why);
    if (!p) throw PeerError(peer_, who() + " is unreachable: mapping its buffer (" + why + ") failed");
    return p;
  });
  return m.ptr + h.offset;
}

// The buffer stays untouched until the peer has read it all.
ShmStep ShmZeroCopy::send_mapped(ShmTransfer& t) {
  if (out_.ring()->mapped_done.load(std::memory_order_acquire) < t.seq) return {false, false};
  t.region.reset();
  return {false, true};
}

// A forward written into the peer's landing: header, then pushes_done once all reduced.
ShmStep ShmZeroCopy::send_pushed(ShmTransfer& f) {
  if (f.ready < f.len) return {false, false};
  if (!f.announced) {
    ZeroCopyHeader h{};
    h.mapped = 2;
    h.length = f.len;
    if (out_.put(reinterpret_cast<const char*>(&h), sizeof h, true, true, false) == 0) return {false, false};
    f.announced = true;
  }
  out_.ring()->pushes_done.store(++pushes_sent_, std::memory_order_release);
  f.region.reset();
  return {true, true};
}

ShmStep ShmZeroCopy::recv_pushed(ShmTransfer& t) {
  if (in_.ring()->pushes_done.load(std::memory_order_acquire) < t.seq) return {false, false};
  t.done = t.len;
  t.region.reset();
  return {true, true};
}

// One piece per call, so the engine keeps every other link of the round moving too.
ShmStep ShmZeroCopy::recv_mapped(ShmTransfer& t, ShmTransfer* f) {
  constexpr size_t kPieceBytes = 1 << 20;
  const size_t n = std::min(kPieceBytes, t.len - t.done);
  const char* src = t.src + t.done;
  if (f && t.done == 0) take_landing(*f);
  if (f && f->push_to) {
    // Each 64 KiB reduced is copied into the peer's landing while it is in L1/L2, streamed
    // as the receives' copies are: with plain stores each line of the landing is first
    // read from memory (docs/benchmarks.md, "Zero-copy" and "Measured choices").
    // The peer closes its landings when its call fails: checked before each piece, so a
    // rank stopped and resumed writes at most the piece it was in.
    constexpr size_t kSubBytes = 64 << 10;
    const bool stream = in_.streams(t.len);
    for (size_t k = 0; k < n; k += kSubBytes) {
      const size_t m = std::min(kSubBytes, n - k);
      t.reduce.apply(t.buf, t.done + k, src + k, m);
      if (out_.ring()->landings_closed.load(std::memory_order_acquire)) continue;
      if (stream) copy_streaming(f->push_to + t.done + k, t.buf + t.done + k, m);
      else std::memcpy(f->push_to + t.done + k, t.buf + t.done + k, m);
    }
  } else {
    // With a forward the peer reads the result back from here: no streamed reduction.
    in_.deliver(t.buf, t.len, t.done, src, n, t.reduce, !f);
  }
  t.done += n;
  if (f) f->ready = t.done;
  if (t.done < t.len) return {true, false};
  in_.ring()->mapped_done.fetch_add(1, std::memory_order_release);
  return {true, true};
}

}  // namespace strata
