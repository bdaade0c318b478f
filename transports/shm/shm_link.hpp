// Shared-memory transport between ranks of one host. Each rank owns one segment in
// /dev/shm holding a single-producer/single-consumer FIFO per local peer sending to it;
// the receiver copies (or reduces) straight out of the FIFO into the user's buffer.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ground/device/memfd_regions.hpp"
#include "transports/ipc/peer_mappings.hpp"
#include "transports/transport.hpp"

namespace strata {

// Small messages (up to kMaxBytes) go through a ring of their own, a message in
// whole 64-byte lines of 56 data bytes behind an 8-byte flag: the line's position in the
// inline stream + 1. The receiver polls the lines themselves, not `head`, so a small
// message costs it one cache-line transfer instead of two in a row (head, then data).
// The ring holds nothing but such lines, so a stale line's flag (an older position)
// can never look current.
struct ShmInline {
  static constexpr size_t kLineData = 56;
  static constexpr size_t kMaxBytes = 256;  // 5 lines: level with the FIFO at 256 B; 512 B ran 0.72x
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

struct ShmRing {
  alignas(64) std::atomic<uint64_t> head;         // bytes ever written (producer)
  alignas(64) std::atomic<uint64_t> tail;         // bytes ever consumed (consumer)
  alignas(64) std::atomic<uint64_t> large_done;   // direct-read transfers finished (consumer)
  alignas(64) std::atomic<uint64_t> inline_tail;  // inline-ring bytes ever consumed (consumer)
  alignas(64) uint64_t capacity;                  // multiple of 64
  std::atomic<uint32_t> direct_ok;                // the consumer can read the producer's memory
  std::atomic<uint64_t> zerocopy_min;             // transfers this large carry a ZeroCopyHeader (0: none)
  alignas(64) std::atomic<uint64_t> pushes_done;  // transfers written into landings, finished (producer)
  std::atomic<uint64_t> landings_closed;          // nonzero: write into no landing any more (consumer)
  static constexpr size_t kLandings = 8;          // the oldest receives not done that can be landings
  alignas(64) ShmLanding landings[kLandings];     // (consumer)
  static constexpr size_t kHeaderBytes = 1024;
  char* data() { return reinterpret_cast<char*>(this) + kHeaderBytes; }
  ShmLanding& landing(uint64_t recv) { return landings[recv % kLandings]; }
  // The inline ring (ShmInline::kRingBytes) follows the FIFO's data.
  char* inline_data() { return data() + capacity; }
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

// Large transfers skip the FIFO: the sender puts the address of its buffer in the FIFO and
// the receiver reads it straight from the sender's memory (process_vm_readv, one copy;
// a reduction reads cache-sized pieces and reduces them at once). Used when the receiver
// proved at setup that it may read the peer's memory, for transfers of at least
// STRATA_SHM_DIRECT_BYTES (default 0: off). Links that read directly do not forward.

// Zero-copy (docs/transports.md, "Zero-copy"): a transfer of at least the receiver's
// `zerocopy_min` starts with this 64-byte header in the FIFO, so the sender decides per
// message. `mapped` 0: the bytes follow in the FIFO. 1: they stay in the sender's
// shareable host memory (ground/device/shared_host.hpp), the allocation `id` open as `fd`
// in the sender; the receiver opens it through /proc/<pid>/fd once, keeps it mapped (a
// least-recently-used cache), copies or reduces straight from it and then bumps
// `large_done`, on which the send completes. 2 (a forward, STRATA_SHM_ZEROCOPY_PUSH): the
// sender wrote the `length` bytes into the receive's landing (ShmLanding) as it reduced
// them and bumps `pushes_done` once they are all there.
struct ZeroCopyHeader {
  uint64_t mapped, fd, id, offset, length;
  uint64_t pad[3];
};
static_assert(sizeof(ZeroCopyHeader) == 64);
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
  int owner_pid() const;             // the process that created the segment
  uint64_t owner_probe_addr() const;  // an address in that process holding kProbeValue
  int owner_fd() const;              // the segment's fd in that process (kept open while it lives)
  // Whether this process can open the owner's files through /proc/<pid>/fd (the zero-copy
  // path needs it): tried on the segment itself.
  bool can_open_owner_files() const;
  static constexpr uint64_t kProbeValue = 0x5354524154415052ull;
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

// Transfers waiting on a link, oldest first. A vector and the index of its front: it is
// emptied, not freed, when the last one is popped (every round ends with its links idle),
// so a steady stream of calls allocates nothing, and an element keeps its index while
// others are added or popped.
template <class T>
class TransferQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  size_t front_index() const { return head_; }
  size_t push_back(const T& t) {
    items_.push_back(t);
    return items_.size() - 1;
  }
  T& at(size_t index) { return items_[index]; }
  void pop_front() {
    if (++head_ == items_.size()) items_.clear(), head_ = 0;
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

class ShmLink final : public Link {
 public:
  // `out` lives in the peer's segment, `in` in ours; both segments stay mapped while the
  // link lives.
  ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg,
          std::shared_ptr<ShmSegment> in_seg);
  const char* name() const override { return "shm"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  // Closes our landings: a peer that still reduces (stopped, then resumed) must not write
  // into buffers the program has its own again once the call failed here.
  void abandon() override;
  // A forwarding receive's send counts as a send (the engine posts none on device memory).
  Outstanding outstanding() const override { return {sends_.size(), recvs_.size()}; }

 private:
  struct Transfer {
    char* buf;
    size_t len, done;
    Reduction reduce;
    bool direct = false;    // read by the receiver from the sender's memory
    bool announced = false;  // direct: the buffer's address is in the FIFO
    uint64_t seq = 0;        // direct send: complete when the peer's large_done reaches it
    uint64_t remote = 0;     // direct recv: the sender's address
    bool headed = false;     // starts with a ZeroCopyHeader
    bool mapped = false;     // zero-copy: the bytes stay in the sender's memory
    device::RegionRef region = nullptr;  // headed send: the allocation the peer reads (none: FIFO)
    const char* src = nullptr;  // mapped recv: the bytes, mapped here
    // A forwarding receive's send (its buf is the receive's destination): `ready` bytes of
    // it are reduced so far. The receive points at it with `forward`.
    bool forward_slot = false;
    size_t ready = 0;
    uint64_t number = 0;     // its place among this link's sends or receives (landings match them)
    char* push_to = nullptr;  // forward: the peer's landing, mapped here, written as reduced
    bool pushed = false;      // receive: the peer writes the bytes into our landing
    static constexpr size_t kNoForward = ~size_t(0);
    size_t forward = kNoForward;  // the index of that send in sends_
  };
  struct Descriptor {
    uint64_t addr, len;
  };
  bool send_some();
  bool recv_some();
  // A small message whole into / out of the inline ring; false when it cannot move yet.
  bool inline_put(const char* src, size_t len);
  bool inline_get(char* dst, size_t len, const Reduction& reduce);
  // FIFO primitives: one message, whole or in pieces; return bytes moved.
  size_t fifo_write(const char* src, size_t len, size_t done);
  // Up to `n` bytes of one message into the FIFO; `starts` aligns the message's start,
  // `whole` writes all or nothing.
  size_t fifo_put(const char* bytes, size_t n, bool starts, bool whole);
  bool reduce_forward(Transfer& t);
  // The next piece of an incoming message `done` bytes into its `len`: where it starts in
  // the stream and how much of it has arrived (n == 0: nothing yet), at most `most` bytes
  // and whole elements of `elem` bytes unless it ends the message.
  struct FifoSpan {
    uint64_t start, n;
  };
  FifoSpan fifo_readable(size_t len, size_t done, size_t elem, size_t most);
  // Hands the span's bytes back to the producer.
  void fifo_consumed(const FifoSpan& s);
  size_t fifo_read(char* dst, size_t len, size_t done, const Reduction& reduce);
  bool direct_read(Transfer& t);
  // Whether a send carries a header (the receiver's threshold) and, if so, the shareable
  // allocation it lies in (none: its bytes follow in the FIFO).
  void head_send(Transfer& t) const;
  // A send's header: mapped when head_send found its allocation.
  bool announce(Transfer& t);
  // A receive's header read: false while it has not arrived.
  bool take_header(Transfer& t);
  // The peer's allocation a header names, mapped here (cached).
  const char* peer_bytes(const ZeroCopyHeader& h, size_t len);
  // One piece of a mapped receive (copied or reduced, forwarded when asked).
  void mapped_read(Transfer& t);
  // A receive into shareable memory offers the peer its destination (ShmLanding), once it
  // is among the kLandings oldest not done: a plan posts all its receives at once, and
  // those further back would overwrite the slots of those the peer is about to send.
  void offer_landing(Transfer& t);
  // A forward about to be reduced takes the peer's landing for it, if offered (push_to).
  void take_landing(Transfer& f);
  // A forward written into the peer's landing: header, then pushes_done once all reduced.
  bool finish_push(Transfer& f);

  ShmRing* out_;
  ShmRing* in_;
  std::shared_ptr<ShmSegment> out_seg_, in_seg_;
  uint64_t head_;  // our copy of out_->head (only we write it)
  uint64_t peer_tail_;  // out_->tail as last read: the room it leaves is surely free
  uint64_t inline_head_ = 0, inline_tail_ = 0;  // our positions in the two inline rings
  uint64_t peer_inline_tail_ = 0;                // out_->inline_tail as last read
  uint64_t tail_;  // our copy of in_->tail (only we write it)
  TransferQueue<Transfer> sends_, recvs_;
  int peer_pid_;
  size_t direct_min_;        // smallest transfer read directly (0: never)
  bool we_read_direct_;      // we proved we can read the peer's memory
  uint64_t direct_sent_ = 0;  // direct sends announced so far
  std::vector<char> staging_;  // a direct reducing receive reads here, then reduces
  size_t stream_min_;             // receives this large write with non-temporal stores (0: never)
  std::vector<char> stream_tmp_;  // a streamed reduction's piece, before it is written out
  std::vector<char> forward_tmp_;  // a forwarding receive's reduced piece (cache-sized)
  uint64_t zerocopy_min_;          // what we published in in_->zerocopy_min (0: we never map)
  PeerMappings held_;  // the peer's allocations we keep mapped
  uint64_t mapped_recvs_ = 0;  // receives read in place so far (their order for held_)
  bool push_;                   // STRATA_SHM_ZEROCOPY_PUSH, and opening the peer's files works
  PeerMappings landings_;       // the peer's allocations we write into, mapped writable
  uint64_t sends_posted_ = 0, recvs_posted_ = 0;
  uint64_t pushes_sent_ = 0, pushes_seen_ = 0, pushes_taken_ = 0;

 public:
  ~ShmLink() override;
};

}  // namespace strata
