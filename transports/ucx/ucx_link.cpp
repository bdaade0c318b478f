// UCX transport: tag send/receive and RMA put over a UCP worker shared by a communicator's
// links.
//
// Each direction of a link is a sequence of messages; a transfer of B bytes is cut into
// ceil(B / chunk) messages and message k from rank s carries the tag (s, k).
//
// Two-sided (tag) messages: a plain receive posts every chunk straight into the
// destination; a reducing receive lands one chunk at a time in a staging buffer (mapped
// with ucp_mem_map once per link) and is reduced from there.
//
// One-sided (put) messages, for chunks of kPutMin bytes or more on links that take puts:
// each receiver sets aside a region of `slots` chunks per peer (ucp_mem_map allocating it,
// so over shared memory it is a segment the peer maps) and sends its remote key with the
// worker address. The sender puts a chunk into a free slot, flushes, and sends a notice
// (slot, bytes) under the chunk's tag; the receiver reduces or copies from the slot and
// hands it back with a credit. Over UCX's shared memory a put is one copy into memory the
// receiver reads from its cache, where the tag path's rendezvous goes through
// process_vm_readv (cma), which is slower than memcpy on the machines measured.
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "ground/log.hpp"
#include "strata/error.hpp"
#include "transports/streaming.hpp"
#include "transports/ucx/ucx_config.hpp"
#include "transports/ucx/ucx_conn_info.hpp"
#include "transports/ucx/ucx_tag.hpp"
#include "transports/link_setup.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace strata::ucx {

namespace {

// Chunks this large or larger go by put on links that take puts; smaller ones go eagerly
// as tag messages, which is cheaper than a put, a flush and a notice.
constexpr size_t kPutMin = 16 << 10;
// Plain receives of this many bytes or more copy their put chunks out of the slots with
// non-temporal stores (transports/streaming.hpp). Reducing receives keep ordinary stores:
// a reduced piece is usually sent on next (the ring's reduce-scatter), and non-temporal
// stores would make that send read it back from memory. Both measured over UCX sm:
// docs/benchmarks.md, "Measured choices".
constexpr size_t kStreamMin = 256 << 10;

// A link's one-sided path: the region this rank set aside for the peer's puts, and where
// in the peer this rank puts (its region's address and packed remote key).
struct PutPath {
  char* in = nullptr;
  uint64_t out = 0;
  std::vector<char> out_rkey;
};

class UcxLink final : public Link {
 public:
  // UCP_ERR_HANDLING_MODE_PEER, so a lost peer fails its requests and calls on_error,
  // except on one host where UCX_TLS lets UCX use shared memory: its transports (posix,
  // sysv, cma) cannot handle peer failure and requiring it would push UCX to tcp over
  // loopback; a dead local process is noticed by the engine through its control socket.
  // Over tcp without peer error handling, UCX 1.13 aborted a survivor in 10 of 100 runs
  // of a killed peer (tcp_ep.c:939, UCT_TCP_EP_FLAG_PUT_TX_WAITING_ACK; docs/transports.md).
  UcxLink(int peer, int rank, std::shared_ptr<Worker> w, const std::vector<char>& remote, bool same_host, size_t chunk,
          int slots, std::optional<PutPath> puts)
      : Link(peer), rank_(rank), w_(std::move(w)), chunk_(chunk), nslots_(slots) {
    state_ = w_->ep_state(peer);
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    p.err_mode = same_host && mapped_memory_use(std::getenv("UCX_TLS")) ? UCP_ERR_HANDLING_MODE_NONE
                                                                        : UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &on_error;
    p.err_handler.arg = state_;
    ucs_status_t st = ucp_ep_create(w_->worker, &p, &ep_);
    if (st != UCS_OK)
      throw SystemError("UCX: connecting to rank " + std::to_string(peer) + " failed: " + status_text(st));
    if (puts) {
      try {
        start_puts(*puts);
      } catch (...) {
        release(true);  // no destructor runs for an object whose constructor threw
        throw;
      }
    }
    // Only put slots mapped here are filled by this process's own stores.
    declare_caps({.forwards_reductions = false,
                  .streaming_stores = out_ptr_ != nullptr,
                  .memory = {MemoryKind::host},
                  .needs_registration = false});
  }

  ~UcxLink() override { release(state_->status != UCS_OK || !inflight_.empty() || !pending_puts_.empty()); }

  const char* name() const override { return "ucx"; }

  void post_send(const void* buf, size_t bytes) override {
    const char* p = static_cast<const char*>(buf);
    for (size_t i = 0, n = chunk_count(bytes, chunk_); i < n; ++i) {
      size_t len = chunk_bytes(bytes, chunk_, i);
      if (by_put(len)) pending_puts_.push_back({p + i * chunk_, len, send_seq_++});
      else tag_send(p + i * chunk_, len, make_tag(rank_, send_seq_++));
    }
    if (!pending_puts_.empty()) start_puts_pending();
  }

  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override {
    char* p = static_cast<char*>(buf);
    for (size_t i = 0, n = chunk_count(bytes, chunk_); i < n; ++i) {
      size_t len = chunk_bytes(bytes, chunk_, i);
      Reduction r = reduce ? reduce.from(i * chunk_) : Reduction{};
      if (by_put(len)) start_notice_recv(p + i * chunk_, len, recv_seq_++, r, bytes >= kStreamMin);
      else if (reduce) staged_.push_back({p + i * chunk_, len, recv_seq_++, r});
      else start_recv(p + i * chunk_, len, recv_seq_++, {}, -1);
    }
    if (!staged_.empty()) post_staged();
  }

  bool progress() override {
    if (state_->status != UCS_OK) fail("endpoint", state_->status);
    // What UCX did inside (keepalives, resending into a full socket, other endpoints of the
    // shared worker) is not progress of ours: counted, it kept resetting the engine's
    // no-progress timeout while a stopped peer took nothing (survivors reported it 3.7 s
    // into a call with STRATA_TIMEOUT=2). Only our operations completing, or credits, are.
    // UCX's internal steps (a rendezvous's handshake and data) are driven here, a bounded
    // number of rounds, rather than by the engine's spinning, which waits for ours.
    for (int i = 0; i < 16 && ucp_worker_progress(w_->worker) != 0; ++i) {
    }
    bool moved = take_credits();
    for (size_t i = 0; i < inflight_.size();) {
      Op& o = inflight_[i];
      ucs_status_t st;
      size_t got = o.len;
      if (o.kind == Kind::recv || o.kind == Kind::notice) {
        ucp_tag_recv_info_t info{};
        st = ucp_tag_recv_request_test(o.req, &info);
        if (st == UCS_OK) got = info.length;
      } else {
        st = ucp_request_check_status(o.req);
      }
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      Op done = o;
      ucp_request_free(o.req);
      inflight_[i] = inflight_.back();
      inflight_.pop_back();
      complete(done, st, got);
      moved = true;
    }
    if (!staged_.empty()) post_staged();
    if (!pending_puts_.empty()) start_puts_pending();
    return moved;
  }

  bool idle() const override { return inflight_.empty() && staged_.empty() && pending_puts_.empty(); }

 private:
  enum class Kind {
    send,    // a tag send or a put: nothing to do when it completes
    recv,    // a tag receive, into the destination or (slot >= 0) a staging slot
    flush,   // the flush after a put into the peer's slot `slot`: then the notice goes
    notice,  // a put's notice (notice_in_[slot]) for the chunk at dst
  };
  struct Op {
    void* req;
    Kind kind;
    char* dst;
    size_t len;
    Reduction reduce;
    int slot;
    uint64_t seq;
    bool stream = false;  // a put's chunk of a large transfer: taken with non-temporal stores
  };
  struct Staged {
    char* dst;
    size_t len;
    uint64_t seq;
    Reduction reduce;
  };
  struct PendingPut {
    const char* src;
    size_t len;
    uint64_t seq;
  };

  // Requests still outstanding mean the communicator failed: receives must not land in
  // memory the caller reuses, and sends may wait for a peer that will never match them,
  // so the endpoint is closed by force (which cancels them) rather than flushed.
  void release(bool failed) {
    for (Op& o : inflight_) {
      if (o.kind == Kind::recv || o.kind == Kind::notice) ucp_request_cancel(w_->worker, o.req);
      ucp_request_free(o.req);
    }
    // Credits are always awaited; cancelling them is no sign of failure.
    for (void* r : credit_reqs_) {
      if (!r) continue;
      ucp_request_cancel(w_->worker, r);
      ucp_request_free(r);
    }
    if (rkey_) ucp_rkey_destroy(rkey_);
    w_->retire(ep_, failed);
  }

  static void on_error(void* arg, ucp_ep_h, ucs_status_t st) {
    auto* s = static_cast<EpState*>(arg);
    if (s->status == UCS_OK) s->status = st;
  }

  char* slot_ptr(int slot) const { return stage_ + static_cast<size_t>(slot) * chunk_; }
  bool by_put(size_t len) const { return rkey_ != nullptr && len >= kPutMin; }

  void tag_send(const void* buf, size_t len, uint64_t tag) {
    ucp_request_param_t prm{};
    void* r = ucp_tag_send_nbx(ep_, buf, len, tag, &prm);
    if (r == nullptr) return;  // completed in place
    if (UCS_PTR_IS_ERR(r)) fail("send", UCS_PTR_STATUS(r));
    inflight_.push_back({r, Kind::send, nullptr, len, {}, -1, 0});
  }

  // Always a request, so that ucp_tag_recv_request_test reports the length received.
  void* tag_recv(void* into, size_t len, uint64_t tag, ucp_mem_h memh) {
    ucp_request_param_t prm{};
    if (memh) {
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
      prm.memh = memh;
    }
    prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    void* r = ucp_tag_recv_nbx(w_->worker, into, len, tag, kFullMask, &prm);
    if (UCS_PTR_IS_ERR(r)) {
      if (UCS_PTR_STATUS(r) == UCS_ERR_MESSAGE_TRUNCATED) size_mismatch(len);
      fail("receive", UCS_PTR_STATUS(r));
    }
    if (r == nullptr) throw InternalError("UCX: a tag receive completed without a request");
    return r;
  }

  void start_recv(char* dst, size_t len, uint64_t seq, const Reduction& reduce, int slot) {
    char* into = slot >= 0 ? slot_ptr(slot) : dst;
    void* r = tag_recv(into, len, make_tag(peer(), seq), slot >= 0 ? memh_ : nullptr);
    inflight_.push_back({r, Kind::recv, dst, len, reduce, slot, seq});
  }

  // A finished request: reduce a staged chunk, take a put's chunk from its slot, send a
  // put's notice, or throw what went wrong.
  void complete(const Op& op, ucs_status_t st, size_t got) {
    bool recv = op.kind == Kind::recv || op.kind == Kind::notice;
    size_t expected = op.kind == Kind::notice ? sizeof(PutNotice) : op.len;
    if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && recv && got != expected)) size_mismatch(op.len);
    if (st != UCS_OK) fail(recv ? "receive" : op.kind == Kind::flush ? "put" : "send", st);
    if (op.kind == Kind::recv && op.slot >= 0) {
      op.reduce.apply(op.dst, 0, slot_ptr(op.slot), op.len);
      free_.push_back(op.slot);
    } else if (op.kind == Kind::flush) {
      send_notice(op.slot, op.seq);
    } else if (op.kind == Kind::notice) {
      take_put(op);
    }
  }

  [[noreturn]] void size_mismatch(size_t expected) const {
    throw PeerError(peer(), "rank " + std::to_string(peer()) + " sent a message of another size than rank " +
                                std::to_string(rank_) + " expected (" + std::to_string(expected) +
                                " bytes): mismatched send/receive sizes");
  }

  // Staging is mapped on the first reducing receive and kept for the worker's life.
  void post_staged() {
    if (!stage_) {
      Worker::Region r = w_->map_region(chunk_ * static_cast<size_t>(nslots_));
      stage_ = r.base;
      memh_ = r.memh;
      for (int s = nslots_ - 1; s >= 0; --s) free_.push_back(s);
    }
    while (!staged_.empty() && !free_.empty()) {
      Staged c = staged_.front();
      staged_.pop_front();
      int slot = free_.back();
      free_.pop_back();
      start_recv(c.dst, c.len, c.seq, c.reduce, slot);
    }
  }

  // --- The one-sided path ---

  void start_puts(const PutPath& path) {
    ucs_status_t st = ucp_ep_rkey_unpack(ep_, path.out_rkey.data(), &rkey_);
    if (st != UCS_OK)
      throw SystemError("UCX: rank " + std::to_string(peer()) + "'s remote key does not unpack here (" +
                        status_text(st) + "); STRATA_UCX_PUTS=0 turns puts off");
    in_ = path.in;
    void* direct = nullptr;
    if (ucp_rkey_ptr(rkey_, path.out, &direct) == UCS_OK) out_ptr_ = static_cast<char*>(direct);
    out_ = path.out;
    notice_out_.resize(static_cast<size_t>(nslots_));
    credit_out_.resize(static_cast<size_t>(nslots_));
    credit_in_.resize(static_cast<size_t>(nslots_));
    for (int s = nslots_ - 1; s >= 0; --s) out_free_.push_back(s);
    for (int s = 0; s < nslots_; ++s) credit_reqs_.push_back(post_credit_recv(static_cast<uint64_t>(s)));
  }

  void* post_credit_recv(uint64_t seq) {
    return tag_recv(&credit_in_[seq % credit_in_.size()], sizeof(uint64_t), make_tag(peer(), seq, TagKind::credit),
                    nullptr);
  }

  // Credits are awaited in order, one receive per slot: credit k lands in credit_in_[k % slots],
  // and once it is taken that receive is posted again for credit k + slots.
  bool take_credits() {
    bool moved = false;
    while (!credit_reqs_.empty()) {
      const size_t k = credits_taken_ % credit_reqs_.size();
      ucp_tag_recv_info_t info{};
      ucs_status_t st = ucp_tag_recv_request_test(credit_reqs_[k], &info);
      if (st == UCS_INPROGRESS) break;
      if (st != UCS_OK) fail("receive", st);
      uint64_t slot = credit_in_[k];
      if (info.length != sizeof(uint64_t) || slot >= static_cast<uint64_t>(nslots_))
        throw PeerError(peer(), "rank " + std::to_string(peer()) + " sent a malformed UCX credit");
      out_free_.push_back(static_cast<int>(slot));
      ucp_request_free(credit_reqs_[k]);
      credit_reqs_[k] = nullptr;  // released if posting the next one throws
      credit_reqs_[k] = post_credit_recv(credits_taken_ + credit_reqs_.size());
      ++credits_taken_;
      moved = true;
    }
    return moved;
  }

  // Puts every waiting chunk there is a free slot for, each followed by a flush; the
  // notice goes once the flush says the data is in the peer's memory.
  void start_puts_pending() {
    while (!pending_puts_.empty() && !out_free_.empty()) {
      PendingPut c = pending_puts_.front();
      pending_puts_.pop_front();
      int slot = out_free_.back();
      out_free_.pop_back();
      put(slot, c.src, c.len);
      notice_out_[static_cast<size_t>(slot)] = {static_cast<uint64_t>(slot), c.len};
      ucp_request_param_t fprm{};
      void* f = ucp_ep_flush_nbx(ep_, &fprm);
      if (UCS_PTR_IS_ERR(f)) fail("put", UCS_PTR_STATUS(f));
      if (f) inflight_.push_back({f, Kind::flush, nullptr, c.len, {}, slot, c.seq});
      else send_notice(slot, c.seq);
    }
  }

  // UCX's put copies into a shared-memory slot with ordinary stores. When the peer's region
  // is mapped here (ucp_rkey_ptr) and the plan's StoreChooser found non-temporal stores
  // faster (cores far apart: the slot's lines are then not fetched from the peer's cache
  // only to be overwritten), the link writes the slot itself.
  void put(int slot, const char* src, size_t len) {
    size_t at = static_cast<size_t>(slot) * chunk_;
    if (out_ptr_ && streaming_stores()) return copy_streaming(out_ptr_ + at, src, len);
    ucp_request_param_t prm{};
    void* r = ucp_put_nbx(ep_, src, len, out_ + at, rkey_, &prm);
    if (UCS_PTR_IS_ERR(r)) fail("put", UCS_PTR_STATUS(r));
    if (r) inflight_.push_back({r, Kind::send, nullptr, len, {}, -1, 0});
  }

  void send_notice(int slot, uint64_t seq) {
    // A put through shared memory is a copy this process made, possibly with
    // non-temporal stores: they must be visible before the notice is.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tag_send(&notice_out_[static_cast<size_t>(slot)], sizeof(PutNotice), make_tag(rank_, seq));
  }

  void start_notice_recv(char* dst, size_t len, uint64_t seq, const Reduction& reduce, bool stream) {
    int idx;
    if (notice_free_.empty()) {
      idx = static_cast<int>(notice_in_.size());
      notice_in_.emplace_back();
    } else {
      idx = notice_free_.back();
      notice_free_.pop_back();
    }
    void* r = tag_recv(&notice_in_[static_cast<size_t>(idx)], sizeof(PutNotice), make_tag(peer(), seq), nullptr);
    inflight_.push_back({r, Kind::notice, dst, len, reduce, idx, seq, stream});
  }

  // The chunk a notice announces: reduced or copied out of its slot, which goes back.
  void take_put(const Op& op) {
    PutNotice n = notice_in_[static_cast<size_t>(op.slot)];
    notice_free_.push_back(op.slot);
    if (n.bytes != op.len) size_mismatch(op.len);
    if (n.slot >= static_cast<uint64_t>(nslots_))
      throw PeerError(peer(), "rank " + std::to_string(peer()) + " sent a malformed UCX put notice");
    const char* src = in_ + n.slot * chunk_;
    if (op.reduce) op.reduce.apply(op.dst, 0, src, op.len);
    else if (op.stream) copy_streaming(op.dst, src, op.len);
    else std::memcpy(op.dst, src, op.len);
    credit_out_[n.slot] = n.slot;
    tag_send(&credit_out_[n.slot], sizeof(uint64_t), make_tag(rank_, credit_send_seq_++, TagKind::credit));
  }

  [[noreturn]] void fail(const char* what, ucs_status_t st) const {
    throw PeerError(peer(), "rank " + std::to_string(peer()) + " is unreachable: ucx " + what +
                                " failed: " + status_text(st));
  }

  int rank_;
  std::shared_ptr<Worker> w_;
  EpState* state_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  size_t chunk_;
  int nslots_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
  std::vector<Op> inflight_;
  std::deque<Staged> staged_;  // reducing chunks waiting for a staging slot
  char* stage_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  std::vector<int> free_;
  // The one-sided path (rkey_ set when this link puts and takes puts).
  ucp_rkey_h rkey_ = nullptr;
  char* in_ = nullptr;  // the peer puts here
  uint64_t out_ = 0;    // this rank puts there
  char* out_ptr_ = nullptr;  // the same, mapped here (shared memory), else null
  std::deque<PendingPut> pending_puts_;
  std::vector<int> out_free_;                    // the peer's slots this rank may put into
  std::vector<PutNotice> notice_out_;            // by slot: stable until the slot's credit
  std::vector<uint64_t> credit_out_, credit_in_;  // by slot / by credit sequence
  std::vector<void*> credit_reqs_;
  uint64_t credit_send_seq_ = 0, credits_taken_ = 0;
  std::deque<PutNotice> notice_in_;  // grows, never shrinks: receives point into it

  std::vector<int> notice_free_;
};

// Puts (STRATA_UCX_PUTS): "auto" (default) between ranks on one host when UCX may use
// shared memory there (over tcp a put costs more than a tag message), "1" between all
// ranks (for RDMA, where a put is an RDMA write), "0" never.
enum class PutUse { never, same_host, always };

class UcxSetup final : public LinkSetup {
 public:
  UcxSetup(const SetupContext& ctx, size_t chunk, size_t put_chunk, int slots, PutUse puts)
      : w_(std::make_shared<Worker>(ctx.nranks)),
        rank_(ctx.rank),
        same_host_(ctx.same_host),
        chunk_(chunk),
        put_chunk_(put_chunk),
        slots_(slots),
        puts_(puts) {
    desc_ = "chunk " + std::to_string(chunk_) + " B, " + std::to_string(slots_) + " staging chunks, puts " +
            (puts == PutUse::never ? "off"
                                   : std::string(puts == PutUse::same_host ? "on one host" : "everywhere") + " in " +
                                         std::to_string(put_chunk_) + " B chunks");
  }
  std::vector<char> local_info(int peer) override {
    ConnInfo mine;
    mine.address = w_->address;
    if (takes_puts(same_host_[static_cast<size_t>(peer)])) {
      Worker::Region r = w_->map_region(put_chunk_ * static_cast<size_t>(slots_));
      regions_[peer] = r.base;
      mine.region = reinterpret_cast<uint64_t>(r.base);
      mine.slot_bytes = put_chunk_;
      mine.slots = static_cast<uint32_t>(slots_);
      mine.rkey = std::move(r.rkey);
    }
    return encode(mine);
  }
  // Both ends reach the same verdict on puts: each set aside a region under the same rule.
  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) override {
    const bool same_host = same_host_[static_cast<size_t>(peer)];
    std::optional<ConnInfo> theirs = decode(remote);
    if (!theirs) throw SystemError("UCX: malformed connection info from rank " + std::to_string(peer));
    std::optional<PutPath> path;
    auto mine = regions_.find(peer);
    if (mine != regions_.end() && theirs->takes_puts()) {
      if (theirs->slot_bytes != put_chunk_ || theirs->slots != static_cast<uint32_t>(slots_))
        throw InvalidArgument("UCX puts: rank " + std::to_string(peer) + " has " + std::to_string(theirs->slots) +
                              " slots of " + std::to_string(theirs->slot_bytes) + " B, rank " + std::to_string(rank_) +
                              " " + std::to_string(slots_) + " of " + std::to_string(put_chunk_) +
                              " B; set the same STRATA_UCX_PUT_CHUNK_BYTES and STRATA_UCX_STAGING_CHUNKS on every rank");
      path = PutPath{mine->second, theirs->region, theirs->rkey};
    }
    size_t chunk = path ? put_chunk_ : chunk_;
    return std::make_unique<UcxLink>(peer, rank_, w_, theirs->address, same_host, chunk, slots_, std::move(path));
  }
  std::string describe(int) const override { return desc_; }

 private:
  bool takes_puts(bool same_host) const {
    return puts_ == PutUse::always || (puts_ == PutUse::same_host && same_host && mapped_memory_use(std::getenv("UCX_TLS")));
  }

  std::shared_ptr<Worker> w_;
  int rank_;
  std::vector<bool> same_host_;  // by rank
  size_t chunk_, put_chunk_;  // a link's transfers are cut in put_chunk_ pieces if it puts
  int slots_;
  PutUse puts_;
  std::map<int, char*> regions_;  // by peer: where it puts
  std::string desc_;
};

// Creates the communicator's UCP context and worker; each peer is sent its address.
std::unique_ptr<LinkSetup> create_setup(const SetupContext& ctx) {
  if (ctx.nranks > kMaxRanks) throw InvalidArgument("STRATA_TRANSPORT=ucx supports at most " + std::to_string(kMaxRanks) + " ranks");
  size_t chunk = static_cast<size_t>(settings::integer("STRATA_UCX_CHUNK_BYTES")) & ~size_t(63);
  int slots = static_cast<int>(settings::integer("STRATA_UCX_STAGING_CHUNKS"));
  std::string puts = settings::text("STRATA_UCX_PUTS");  // "" (auto), "auto", "0" or "1"
  PutUse use = puts == "0" ? PutUse::never : puts == "1" ? PutUse::always : PutUse::same_host;
  // Smaller than tag messages: a slot the peer has just written is still in cache when it is
  // taken out (256 KiB against 1 MiB: docs/benchmarks.md, "Measured choices").
  size_t put_chunk = static_cast<size_t>(settings::integer("STRATA_UCX_PUT_CHUNK_BYTES")) & ~size_t(63);
  return std::make_unique<UcxSetup>(ctx, chunk, put_chunk, slots, use);
}

}  // namespace

}  // namespace strata::ucx

namespace strata {
const LinkSetupTransport kUcxTransport{&ucx::rdma_capable, nullptr, &ucx::create_setup};
}  // namespace strata
