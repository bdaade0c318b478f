// The ibverbs data path, independent of the device: an IbLink drives one or more queue
// pairs through the QpOps interface (implemented over libibverbs in ib_verbs.cpp, and in
// memory by the tests).
//
// A transfer is cut into chunks of `chunk` bytes; chunk k of a direction goes over queue
// pair k % nqps (striping over NICs), into ring slot (k / nqps) % nslots of that pair. The
// sender copies the chunk into a registered send slot and RDMA-writes it with immediate
// (imm = length); the receiver copies or reduces it out of its ring slot into the
// destination, then credits the sender (ib_credits.hpp). Each queue pair is ordered, so
// chunks are consumed in order.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/ibverbs/ib_credits.hpp"
#include "transports/transport.hpp"

namespace strata::ibverbs {

struct Completion {
  enum Kind : uint8_t { write, credit, recv } kind;
  bool ok;
  uint32_t imm;       // recv: the immediate (chunk length)
  std::string error;  // !ok: what the device said
};

class QpOps {
 public:
  virtual ~QpOps() = default;
  virtual uint32_t send_slots() const = 0;    // local send ring
  virtual uint32_t recv_slots() const = 0;    // local receive ring (the peer writes into it)
  virtual uint32_t remote_slots() const = 0;  // the peer's receive ring
  virtual char* send_buf(uint32_t slot) = 0;
  virtual const char* recv_buf(uint32_t slot) = 0;
  // RDMA write with immediate: `len` bytes of send slot `local` into the peer's ring slot
  // `remote`, imm = len; completes as Completion::write (in order).
  virtual void post_write(uint32_t local, uint32_t remote, uint32_t len) = 0;
  // RDMA write of `consumed` into the peer's credit word; completes as Completion::credit.
  virtual void post_credit(uint64_t consumed) = 0;
  // The newest value the peer wrote into our credit word.
  virtual uint64_t read_credit() const = 0;
  // One receive request, consumed by one incoming write with immediate.
  virtual void post_recv() = 0;
  // Up to `max` completions since the last call.
  virtual int poll(Completion* out, int max) = 0;
  // "mlx5_0:1": the NIC, for error messages.
  virtual std::string where() const = 0;
};

class IbLink final : public Link {
 public:
  // `chunk` must not exceed any slot; `batch` is the credit batch (ib_credits.hpp).
  IbLink(int peer, std::vector<std::unique_ptr<QpOps>> qps, size_t chunk, uint32_t batch);
  ~IbLink() override;
  const char* name() const override { return "ibverbs"; }
  void post_send(const void* buf, size_t bytes) override;
  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override;
  bool progress() override;
  bool idle() const override;
  // A send is done once its last chunk is in a send slot, a receive once its last chunk is
  // out of the ring.
  Outstanding outstanding() const override;

 private:
  struct Pair {
    std::unique_ptr<QpOps> ops;
    SendWindow remote;   // the peer's ring
    SendWindow local;    // our send slots (freed when the write completes)
    RecvWindow in;       // our ring
    std::vector<uint32_t> lengths;  // immediate of each arrived chunk, by ring slot
    uint64_t recvs_arrived = 0;
  };
  struct Chunk {
    char* buf;
    size_t len;
    Reduction reduce;
    uint64_t transfer;  // which transfer of its direction it belongs to
  };
  [[noreturn]] void fail(const Pair& p, const std::string& what) const;
  bool poll_all();
  bool send_some();
  bool recv_some();
  bool report_credit(bool force);

  std::vector<Pair> pairs_;
  size_t chunk_;
  std::deque<Chunk> sends_, recvs_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
  uint64_t sends_posted_ = 0, recvs_posted_ = 0;  // transfers
};

}  // namespace strata::ibverbs
