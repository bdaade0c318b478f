// The shared memory a host's ranks talk through: each rank owns one segment in /dev/shm
// holding one ShmRing per local peer that may send to it. This file is the layout both
// ends of a pair agree on; shm_ring.hpp moves bytes through it, shm_zerocopy.hpp moves
// them around it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace strata {

// Small messages (up to kMaxBytes) go through a ring of their own, a message in
// whole 64-byte lines of 56 data bytes behind an 8-byte flag: the line's position in the
// inline stream + 1. The receiver polls the lines themselves, not `head`, so a small
// message costs it one cache-line transfer instead of two in a row (head, then data).
// The ring holds nothing but such lines, so a stale line's flag (an older position)
// can never look current.
struct ShmInline {
  static constexpr size_t kLineData = 56;
  // 5 lines: where the FIFO catches up with the lines (docs/benchmarks.md, "Measured choices").
  static constexpr size_t kMaxBytes = 256;
  static constexpr size_t kRingBytes = 64 << 10;
  static size_t lines(size_t bytes) { return (bytes + kLineData - 1) / kLineData; }
  // The line at inline-stream position `pos` (a multiple of 64: lines never wrap).
  static char* line(char* ring, uint64_t pos) { return ring + pos % kRingBytes; }
};

// Where the consumer's receive number `recv` - 1 (its receives from this producer, counted
// from 0) lands: a range of its shareable host memory, which the producer may write into
// instead of the consumer reading the bytes (ZeroCopyHeader::mapped 2). `recv` is 0 while
// the consumer rewrites the slot; the producer takes a slot only if `recv` reads the same
// before and after its fields.
struct ShmLanding {
  std::atomic<uint64_t> recv, fd, id, offset, length, bytes;  // length: the allocation's
  uint64_t pad[2];
};
static_assert(sizeof(ShmLanding) == 64);

// One direction of a pair: a FIFO, the inline ring behind it, and the counters of the
// transfers that go around them (shm_zerocopy.hpp).
struct ShmRing {
  alignas(64) std::atomic<uint64_t> head;         // bytes ever written (producer)
  alignas(64) std::atomic<uint64_t> tail;         // bytes ever consumed (consumer)
  alignas(64) std::atomic<uint64_t> mapped_done;  // transfers read in place, finished (consumer)
  alignas(64) std::atomic<uint64_t> inline_tail;  // inline-ring bytes ever consumed (consumer)
  alignas(64) uint64_t capacity;                  // multiple of 64
  std::atomic<uint64_t> zerocopy_min;             // transfers this large carry a ZeroCopyHeader (0: none)
  alignas(64) std::atomic<uint64_t> pushes_done;  // transfers written into landings, finished (producer)
  std::atomic<uint64_t> landings_closed;          // nonzero: write into no landing any more (consumer)
  static constexpr size_t kLandings = 8;          // the oldest receives not done that can be landings
  alignas(64) ShmLanding landings[kLandings];     // (consumer)
  // Every transfer starts 64-byte aligned in the FIFO (a reduction's elements never
  // straddle the wrap, which is a multiple of 64 too): where one starting at `pos` begins.
  static uint64_t message_start(uint64_t pos) { return (pos + 63) & ~uint64_t{63}; }
  static constexpr size_t kHeaderBytes = 1024;
  char* data() { return reinterpret_cast<char*>(this) + kHeaderBytes; }
  ShmLanding& landing(uint64_t recv) { return landings[recv % kLandings]; }
  // The inline ring (ShmInline::kRingBytes) follows the FIFO's data.
  char* inline_data() { return data() + capacity; }
  // The bytes a ring of `capacity` takes, header and inline ring included.
  static size_t bytes(size_t capacity) { return kHeaderBytes + capacity + ShmInline::kRingBytes; }
  // The FIFO's wrap-around, for producer and consumer alike: the `n` bytes at stream
  // position `at` lie in at most two runs of data(); `run(ring, off, bytes)` is called for
  // each in order, `off` being how many of the n bytes came before it.
  template <class Run>
  [[gnu::always_inline]] void runs(uint64_t at, uint64_t n, Run&& run) {
    const uint64_t pos = at % capacity, first = std::min(n, capacity - pos);
    run(data() + pos, uint64_t{0}, first);
    if (n > first) run(data(), first, n - first);
  }
};
static_assert(sizeof(ShmRing) <= ShmRing::kHeaderBytes);

// A mapped segment with `nrings` FIFOs, one per rank of the host that may send to its
// owner. Its pages are touched only for the FIFOs of pairs that connect (populate()), so a
// rank's shared memory grows with the peers it talks to, not with the ranks on its host.
// Peers open it through the owner's descriptor (/proc/<pid>/fd), else by name; the owner
// unlinks the name once a peer has opened it the first way, so nothing stays in /dev/shm.
class ShmSegment {
 public:
  static std::shared_ptr<ShmSegment> create(const std::string& name, int nrings, size_t ring_bytes);
  // `owner_pid`/`owner_fd` >= 0: tried first; `*by_proc` says whether that worked.
  static std::shared_ptr<ShmSegment> open(const std::string& name, int owner_pid = -1, int owner_fd = -1,
                                          bool* by_proc = nullptr);
  // Touches ring i's pages now, here (each side its own mapping), rather than page by page
  // in the first transfers through it.
  void populate(int i) const;
  // The bytes a ring of `ring_bytes` takes in a segment (its header and inline ring too).
  static size_t stride(size_t ring_bytes);
  ~ShmSegment();
  ShmRing* ring(int i) const;
  int nrings() const;
  int owner_pid() const;  // the process that created the segment
  int owner_fd() const;   // the segment's fd in that process (kept open while it lives)
  // Whether this process can open the owner's files through /proc/<pid>/fd (the zero-copy
  // path needs it): tried on the segment itself.
  bool can_open_owner_files() const;
  void unlink();
  const std::string& name() const { return name_; }

 private:
  ShmSegment() = default;
  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
  int fd_ = -1;  // the owner's, kept open
  uint64_t dev_ = 0, ino_ = 0;
};

// The FIFO each pair of a host gets: `rank_bytes` (STRATA_SHM_RANK_BYTES) shared among the
// rank's `host_peers`, whole pages, at most `ring_bytes` (STRATA_SHM_RING_BYTES).
size_t shm_fifo_bytes(size_t rank_bytes, size_t ring_bytes, int host_peers);

}  // namespace strata
