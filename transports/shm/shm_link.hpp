// Shared-memory transport between ranks of one host. Each rank owns one segment in
// /dev/shm holding a single-producer/single-consumer FIFO per local peer sending to it;
// the receiver copies (or reduces) straight out of the FIFO into the user's buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "transports/transport.hpp"

namespace strata {

struct ShmRing {
  alignas(64) std::atomic<uint64_t> head;  // bytes ever written (producer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes ever consumed (consumer)
  alignas(64) uint64_t capacity;           // multiple of 64
  char* data() { return reinterpret_cast<char*>(this) + 192; }
};

// A mapped segment with `nrings` FIFOs. The creator unlinks the name once peers have
// mapped it, so nothing stays in /dev/shm after the job.
class ShmSegment {
 public:
  static std::shared_ptr<ShmSegment> create(const std::string& name, int nrings, size_t ring_bytes);
  static std::shared_ptr<ShmSegment> open(const std::string& name);
  ~ShmSegment();
  ShmRing* ring(int i) const;
  int nrings() const;
  void unlink();

 private:
  ShmSegment() = default;
  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
};

class ShmLink final : public Link {
 public:
  // `out` lives in the peer's segment, `in` in ours; both segments stay mapped while the
  // link lives.
  ShmLink(int peer, ShmRing* out, ShmRing* in, std::shared_ptr<ShmSegment> out_seg,
          std::shared_ptr<ShmSegment> in_seg);
  const char* name() const override { return "shm"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, ReduceFn reduce, size_t elem_size) override;
  bool progress() override;
  bool idle() const override { return sends_.empty() && recvs_.empty(); }

 private:
  struct Transfer {
    char* buf;
    size_t len, done;
    ReduceFn reduce;
    size_t elem_size;
  };
  bool send_some();
  bool recv_some();

  ShmRing* out_;
  ShmRing* in_;
  std::shared_ptr<ShmSegment> out_seg_, in_seg_;
  uint64_t head_;  // our copy of out_->head (only we write it)
  uint64_t tail_;  // our copy of in_->tail (only we write it)
  std::deque<Transfer> sends_, recvs_;
};

}  // namespace strata
