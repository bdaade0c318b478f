// UCX transport: tag send/receive over a UCP worker shared by a communicator's links.
//
// Each direction of a link is a sequence of messages; a transfer of B bytes is cut into
// ceil(B / chunk) messages and message k from rank s carries the tag (s, k). A plain
// receive posts every chunk straight into the destination; a reducing receive lands one
// chunk at a time in a staging buffer (mapped with ucp_mem_map once per link) and is
// reduced from there.
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "log.hpp"
#include "strata/error.hpp"
#include "transports/ucx/ucx_config.hpp"
#include "transports/ucx/ucx_tag.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace strata::ucx {

namespace {

using Clock = std::chrono::steady_clock;

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

// Copying sends instead of zero-copy ones wherever UCX may reach a peer over tcp. UCX's tcp
// transport (1.13.1 here) completes a zero-copy active message twice when sendmsg() fails
// because the peer died while the message was half sent: uct_tcp_ep_sendv completes it
// through uct_tcp_ep_handle_disconnected, then once more with UCS_ERR_ENDPOINT_TIMEOUT, and
// the second completion aborts the survivor inside ucp_worker_progress (uct_iface.h:884
// "comp->count > 0"). Over tcp every tag message above ~8 KiB goes that way (eager
// zero-copy, then rendezvous data as zero-copy active messages), and nothing on our side
// keeps clear of it: the progress call that first meets the dead socket, for whichever
// link, is the one that aborts. Copying sends fail once, cleanly; they cost bandwidth over
// tcp (docs/transports.md), so where UCX has RDMA, which it prefers to tcp, zero-copy stays
// (and the threshold leaves rendezvous reads, such as cma's on one host, zero-copy). The
// key is only modified when the user has not set UCX_ZCOPY_THRESH in the environment.
void avoid_tcp_zero_copy(ucp_config_t* config) {
  if (std::getenv("UCX_ZCOPY_THRESH")) return;
  TcpUse use = tcp_use(std::getenv("UCX_TLS"));
  if (use == TcpUse::no || (use == TcpUse::unless_rdma && rdma_capable())) return;
  ucs_status_t st = ucp_config_modify(config, "ZCOPY_THRESH", "inf");
  if (st != UCS_OK) {
    STRATA_WARN("UCX: could not turn zero-copy sends off (%s); a peer dying mid-transfer over tcp may abort "
                "this process", ucs_status_string(st));
    return;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    STRATA_INFO("UCX: zero-copy sends off (UCX_ZCOPY_THRESH=inf) since UCX may use tcp, where a peer dying "
                "mid-send can abort this process; set UCX_ZCOPY_THRESH to choose otherwise");
  });
}

// What the endpoint error callback writes; owned by the worker so that a callback arriving
// while the endpoint is being closed (after its link is gone) still has somewhere to go.
struct EpState {
  int peer;
  ucs_status_t status = UCS_OK;
};

// The communicator's UCP context and worker. The last link to go closes the endpoints
// (flushing what is still in flight, for a bounded time) and destroys both.
class Worker {
 public:
  Worker(int nranks) {
    ucp_config_t* config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);  // UCX_* from the environment
    if (st != UCS_OK) throw SystemError("UCX: reading the configuration failed: " + status_text(st));
    avoid_tcp_zero_copy(config);
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG;
    p.estimated_num_eps = static_cast<size_t>(nranks);
    p.mt_workers_shared = 0;
    st = ucp_init(&p, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) throw SystemError("UCX: ucp_init failed: " + status_text(st) + " (check UCX_TLS / UCX_NET_DEVICES)");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // Operations of a communicator run one at a time, but not always on the same thread.
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(ctx, &wp, &worker);
    if (st != UCS_OK) {
      ucp_cleanup(ctx);
      throw SystemError("UCX: ucp_worker_create failed: " + status_text(st));
    }
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(worker, &addr, &len);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker);
      ucp_cleanup(ctx);
      throw SystemError("UCX: ucp_worker_get_address failed: " + status_text(st));
    }
    address.assign(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr) + len);
    ucp_worker_release_address(worker, addr);
  }

  ~Worker() {
    // Close every endpoint at once: a flush for healthy ones (eager data still on its way
    // to a peer gets there), a forced close for failed ones; bounded, since a peer that
    // died without UCX noticing yet would hold a flush forever.
    std::vector<void*> reqs;
    for (auto& [ep, failed] : eps_) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      void* r = ucp_ep_close_nbx(ep, &p);
      if (UCS_PTR_IS_PTR(r)) reqs.push_back(r);
    }
    auto deadline = Clock::now() + std::chrono::seconds(2);
    while (!reqs.empty()) {
      ucp_worker_progress(worker);
      for (size_t i = 0; i < reqs.size();) {
        if (ucp_request_check_status(reqs[i]) != UCS_INPROGRESS) {
          ucp_request_free(reqs[i]);
          reqs[i] = reqs.back();
          reqs.pop_back();
        } else {
          ++i;
        }
      }
      if (Clock::now() > deadline) {
        // Destroying a worker with endpoints still closing trips UCX's assertions: leak it
        // instead (only after a peer vanished in a way UCX had not noticed yet).
        STRATA_WARN("UCX: %zu endpoint(s) did not finish closing within 2 s; leaving the UCP worker in place",
                    reqs.size());
        for (void* r : reqs) ucp_request_free(r);
        return;
      }
    }
    for (auto& [memh, buf] : mem_) {
      ucp_mem_unmap(ctx, memh);
      std::free(buf);
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
  }

  EpState* ep_state(int peer) { return &states_.emplace_back(EpState{peer}); }
  void retire(ucp_ep_h ep, bool failed) { eps_.push_back({ep, failed}); }
  void retire_mem(ucp_mem_h memh, void* buf) { mem_.push_back({memh, buf}); }

  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<char> address;

 private:
  std::deque<EpState> states_;  // stable addresses
  std::vector<std::pair<ucp_ep_h, bool>> eps_;
  std::vector<std::pair<ucp_mem_h, void*>> mem_;
};

class UcxLink final : public Link {
 public:
  // Peers on other hosts: UCP_ERR_HANDLING_MODE_PEER, so a lost peer fails its requests
  // and calls on_error. On one host: no error handling, because UCX's shared-memory
  // transports (posix, sysv, cma) cannot do it and requiring it would push UCX to tcp over
  // loopback; a dead local process is noticed by the engine through its control socket.
  UcxLink(int peer, int rank, std::shared_ptr<Worker> w, const std::vector<char>& remote, bool same_host, size_t chunk,
          int slots)
      : Link(peer), rank_(rank), w_(std::move(w)), chunk_(chunk), nslots_(slots) {
    state_ = w_->ep_state(peer);
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    p.err_mode = same_host ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &on_error;
    p.err_handler.arg = state_;
    ucs_status_t st = ucp_ep_create(w_->worker, &p, &ep_);
    if (st != UCS_OK)
      throw SystemError("UCX: connecting to rank " + std::to_string(peer) + " failed: " + status_text(st));
  }

  ~UcxLink() override {
    // Requests still outstanding mean the communicator failed: receives must not land in
    // memory the caller reuses, and sends may wait for a peer that will never match them,
    // so the endpoint is closed by force (which cancels them) rather than flushed.
    for (Op& o : inflight_) {
      if (o.recv) ucp_request_cancel(w_->worker, o.req);
      ucp_request_free(o.req);
    }
    w_->retire(ep_, state_->status != UCS_OK || !inflight_.empty());
    if (stage_) w_->retire_mem(memh_, stage_);
  }

  const char* name() const override { return "ucx"; }

  void post_send(const void* buf, size_t bytes) override {
    const char* p = static_cast<const char*>(buf);
    for (size_t i = 0, n = chunk_count(bytes, chunk_); i < n; ++i) {
      ucp_request_param_t prm{};
      void* r = ucp_tag_send_nbx(ep_, p + i * chunk_, chunk_bytes(bytes, chunk_, i), make_tag(rank_, send_seq_++), &prm);
      if (r == nullptr) continue;  // completed in place
      if (UCS_PTR_IS_ERR(r)) fail("send", UCS_PTR_STATUS(r));
      inflight_.push_back({r, nullptr, 0, {}, -1, false});
    }
  }

  void post_recv(void* buf, size_t bytes, const Reduction& reduce) override {
    char* p = static_cast<char*>(buf);
    for (size_t i = 0, n = chunk_count(bytes, chunk_); i < n; ++i) {
      size_t len = chunk_bytes(bytes, chunk_, i);
      if (reduce) staged_.push_back({p + i * chunk_, len, recv_seq_++, reduce.from(i * chunk_)});
      else start_recv(p + i * chunk_, len, recv_seq_++, {}, -1);
    }
    if (!staged_.empty()) post_staged();
  }

  bool progress() override {
    if (state_->status != UCS_OK) fail("endpoint", state_->status);
    bool moved = ucp_worker_progress(w_->worker) != 0;
    for (size_t i = 0; i < inflight_.size();) {
      Op& o = inflight_[i];
      ucs_status_t st;
      size_t got = o.len;
      if (o.recv) {
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
    return moved;
  }

  bool idle() const override { return inflight_.empty() && staged_.empty(); }

 private:
  struct Op {
    void* req;
    char* dst;
    size_t len;
    Reduction reduce;
    int slot;  // staging slot of a reducing receive, else -1
    bool recv;
  };
  struct Staged {
    char* dst;
    size_t len;
    uint64_t seq;
    Reduction reduce;
  };

  static void on_error(void* arg, ucp_ep_h, ucs_status_t st) {
    auto* s = static_cast<EpState*>(arg);
    if (s->status == UCS_OK) s->status = st;
  }

  char* slot_ptr(int slot) const { return stage_ + static_cast<size_t>(slot) * chunk_; }

  void start_recv(char* dst, size_t len, uint64_t seq, const Reduction& reduce, int slot) {
    ucp_request_param_t prm{};
    if (slot >= 0) {
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
      prm.memh = memh_;
    }
    // Always a request, so that ucp_tag_recv_request_test reports the length received.
    prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    char* into = slot >= 0 ? slot_ptr(slot) : dst;
    void* r = ucp_tag_recv_nbx(w_->worker, into, len, make_tag(peer(), seq), kFullMask, &prm);
    if (UCS_PTR_IS_ERR(r)) {
      if (UCS_PTR_STATUS(r) == UCS_ERR_MESSAGE_TRUNCATED) size_mismatch(len);
      fail("receive", UCS_PTR_STATUS(r));
    }
    if (r == nullptr) throw InternalError("UCX: a tag receive completed without a request");
    inflight_.push_back({r, dst, len, reduce, slot, true});
  }

  // A finished request: reduce a staged chunk, or throw what went wrong.
  void complete(const Op& op, ucs_status_t st, size_t got) {
    if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && op.recv && got != op.len)) size_mismatch(op.len);
    if (st != UCS_OK) fail(op.recv ? "receive" : "send", st);
    if (op.slot >= 0) {
      op.reduce.apply(op.dst, 0, slot_ptr(op.slot), op.len);
      free_.push_back(op.slot);
    }
  }

  [[noreturn]] void size_mismatch(size_t expected) const {
    throw PeerError(peer(), "rank " + std::to_string(peer()) + " sent a message of another size than rank " +
                                std::to_string(rank_) + " expected (" + std::to_string(expected) +
                                " bytes): mismatched send/receive sizes");
  }

  // Staging is mapped on the first reducing receive and kept for the link's life.
  void post_staged() {
    if (!stage_) {
      size_t bytes = chunk_ * static_cast<size_t>(nslots_);
      stage_ = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095)));
      if (!stage_) throw SystemError("UCX: out of memory for the staging buffer");
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = stage_;
      mp.length = bytes;
      ucs_status_t st = ucp_mem_map(w_->ctx, &mp, &memh_);
      if (st != UCS_OK) {
        std::free(stage_);
        stage_ = nullptr;
        throw SystemError("UCX: ucp_mem_map of the staging buffer failed: " + status_text(st));
      }
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
};

class UcxSetup final : public Setup {
 public:
  UcxSetup(int rank, int nranks, size_t chunk, int slots)
      : w_(std::make_shared<Worker>(nranks)), rank_(rank), chunk_(chunk), slots_(slots) {
    desc_ = "chunk " + std::to_string(chunk_) + " B, " + std::to_string(slots_) + " staging chunks";
  }
  std::vector<char> local_info(int) override { return w_->address; }
  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote, bool same_host) override {
    return std::make_unique<UcxLink>(peer, rank_, w_, remote, same_host, chunk_, slots_);
  }
  const char* describe() const override { return desc_.c_str(); }

 private:
  std::shared_ptr<Worker> w_;
  int rank_;
  size_t chunk_;
  int slots_;
  std::string desc_;
};

bool probe_rdma() {
  uct_component_h* comps = nullptr;
  unsigned ncomps = 0;
  if (uct_query_components(&comps, &ncomps) != UCS_OK) return false;
  bool found = false;
  for (unsigned c = 0; c < ncomps && !found; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[c], &attr) != UCS_OK || attr.md_resource_count == 0) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    for (auto& md_desc : mds) {
      uct_md_config_t* cfg = nullptr;
      if (uct_md_config_read(comps[c], nullptr, nullptr, &cfg) != UCS_OK) continue;
      uct_md_h md = nullptr;
      ucs_status_t st = uct_md_open(comps[c], md_desc.md_name, cfg, &md);
      uct_config_release(cfg);
      if (st != UCS_OK) continue;
      uct_tl_resource_desc_t* res = nullptr;
      unsigned nres = 0;
      if (uct_md_query_tl_resources(md, &res, &nres) == UCS_OK) {
        for (unsigned i = 0; i < nres; ++i) {
          std::string tl = res[i].tl_name;
          // InfiniBand / RoCE transports: rc_verbs, rc_mlx5, dc_mlx5, ud_verbs, ud_mlx5.
          if (res[i].dev_type == UCT_DEVICE_TYPE_NET &&
              (tl.rfind("rc", 0) == 0 || tl.rfind("dc", 0) == 0 || tl.rfind("ud", 0) == 0)) {
            STRATA_INFO("UCX: RDMA transport %s on %s", res[i].tl_name, res[i].dev_name);
            found = true;
          }
        }
        uct_release_tl_resource_list(res);
      }
      uct_md_close(md);
    }
  }
  uct_release_component_list(comps);
  return found;
}

}  // namespace

bool built() { return true; }

bool rdma_capable() {
  static std::once_flag once;
  static bool result = false;
  std::call_once(once, [] {
    result = probe_rdma();
    if (!result) STRATA_INFO("UCX reports no RDMA-capable device; it is not the default between hosts");
  });
  return result;
}

std::unique_ptr<Setup> Setup::create(int rank, int nranks, const Config& cfg) {
  if (nranks > kMaxRanks) throw InvalidArgument("STRATA_TRANSPORT=ucx supports at most " + std::to_string(kMaxRanks) + " ranks");
  size_t chunk = static_cast<size_t>(env_int("STRATA_UCX_CHUNK_BYTES", 1 << 20, 4096, 1LL << 30)) & ~size_t(63);
  int slots = static_cast<int>(env_int("STRATA_UCX_STAGING_CHUNKS", 4, 1, 64));
  return std::make_unique<UcxSetup>(rank, nranks, chunk, slots);
}

}  // namespace strata::ucx
