// The ibverbs transport over libibverbs: device and port choice (STRATA_IB_HCA), RC queue
// pairs connected from the info exchanged over the control sockets (ib_wire.hpp), and the
// QpOps the device-independent IbLink drives (ib_link.hpp).
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "ground/log.hpp"
#include "strata/error.hpp"
#include "transports/ibverbs/ib_hca.hpp"
#include "transports/ibverbs/ib_link.hpp"
#include "transports/ibverbs/ib_regcache.hpp"
#include "transports/ibverbs/ib_wire.hpp"
#include "transports/link_setup.hpp"

namespace strata::ibverbs {

namespace {

struct PortId {
  std::string dev;
  int port;
  uint8_t link_layer;
};

// Every active port of every device, probed once per process (the filter is applied per
// call, so STRATA_IB_HCA is read when a communicator is created).
struct Probe {
  std::vector<PortId> ports;
  std::string why_none;  // when no device or no active port
};

const Probe& probe() {
  static std::once_flag once;
  static Probe p;
  std::call_once(once, [] {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) {
      p.why_none = std::string("ibv_get_device_list found no RDMA device") + (list ? "" : std::string(" (") + std::strerror(errno) + ")");
      if (list) ibv_free_device_list(list);
      STRATA_INFO("ibverbs: %s; the ibverbs transport is not available", p.why_none.c_str());
      return;
    }
    for (int d = 0; d < n; ++d) {
      const char* name = ibv_get_device_name(list[d]);
      ibv_context* ctx = ibv_open_device(list[d]);
      if (!ctx) {
        STRATA_INFO("ibverbs: cannot open %s: %s", name, std::strerror(errno));
        continue;
      }
      ibv_device_attr da{};
      if (ibv_query_device(ctx, &da) == 0) {
        for (int port = 1; port <= da.phys_port_cnt; ++port) {
          ibv_port_attr pa{};
          if (ibv_query_port(ctx, static_cast<uint8_t>(port), &pa) != 0) continue;
          if (pa.state != IBV_PORT_ACTIVE) {
            STRATA_INFO("ibverbs: %s:%d is %s; skipped", name, port, ibv_port_state_str(pa.state));
            continue;
          }
          uint8_t ll = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkIb;
          p.ports.push_back({name, port, ll});
        }
      }
      ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (p.ports.empty()) {
      p.why_none = "ibv_get_device_list found " + std::to_string(n) + " device(s) but no active port";
      STRATA_INFO("ibverbs: %s; the ibverbs transport is not available", p.why_none.c_str());
    }
  });
  return p;
}

std::vector<PortId> selected_ports(std::string* why) {
  const Probe& p = probe();
  std::string spec = settings::text("STRATA_IB_HCA");
  HcaFilter f = parse_hca_list(spec);
  std::vector<PortId> out;
  for (const PortId& id : p.ports)
    if (hca_selected(f, id.dev, id.port)) out.push_back(id);
  if (why) {
    if (!p.why_none.empty()) *why = p.why_none;
    else if (out.empty()) *why = "no active port matches STRATA_IB_HCA=" + spec;
  }
  return out;
}

// One port of a device, opened for a communicator: its context, protection domain,
// addressing, and the registration cache of the memory the links put on it.
struct Nic {
  std::string dev;
  int port = 1;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr attr{};
  int gid_index = 0;
  ibv_gid gid{};
  uint8_t link_layer = kLinkIb;
  std::unique_ptr<RegCache> cache;

  std::string where() const { return dev + ":" + std::to_string(port); }
  ~Nic() {
    cache.reset();
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

[[noreturn]] void verbs_fail(const std::string& what, int err) {
  throw SystemError("ibverbs: " + what + " failed: " + std::strerror(err ? err : errno));
}

// RoCE: the GID to use when STRATA_IB_GID_INDEX is not set: RoCE v2 with an IPv4-mapped
// address first, then any RoCE v2, then any non-zero GID.
int pick_gid_index(ibv_context* ctx, int port, int table_len) {
  int best = -1, best_score = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &e, 0) != 0) continue;
    bool zero = true;
    for (uint8_t b : e.gid.raw) zero &= b == 0;
    if (zero) continue;
    bool v4 = e.gid.raw[10] == 0xff && e.gid.raw[11] == 0xff;
    for (int k = 0; k < 10; ++k) v4 &= e.gid.raw[k] == 0;
    int score = (e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : 0) + (v4 ? 1 : 0);
    if (score > best_score) best = i, best_score = score;
  }
  return best < 0 ? 0 : best;
}

std::shared_ptr<Nic> open_nic(const PortId& id, int gid_index) {
  auto nic = std::make_shared<Nic>();
  nic->dev = id.dev;
  nic->port = id.port;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int d = 0; list && d < n && !nic->ctx; ++d)
    if (id.dev == ibv_get_device_name(list[d])) nic->ctx = ibv_open_device(list[d]);
  if (list) ibv_free_device_list(list);
  if (!nic->ctx) verbs_fail("opening " + id.dev, errno);
  if (ibv_query_port(nic->ctx, static_cast<uint8_t>(id.port), &nic->attr) != 0) verbs_fail("querying " + nic->where(), errno);
  nic->link_layer = nic->attr.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkIb;
  if (gid_index < 0) gid_index = nic->link_layer == kLinkEthernet ? pick_gid_index(nic->ctx, id.port, nic->attr.gid_tbl_len) : 0;
  if (gid_index >= nic->attr.gid_tbl_len)
    throw InvalidArgument("STRATA_IB_GID_INDEX=" + std::to_string(gid_index) + " is beyond the GID table of " + nic->where() +
                          " (" + std::to_string(nic->attr.gid_tbl_len) + " entries)");
  nic->gid_index = gid_index;
  if (ibv_query_gid(nic->ctx, static_cast<uint8_t>(id.port), gid_index, &nic->gid) != 0)
    verbs_fail("reading GID " + std::to_string(gid_index) + " of " + nic->where(), errno);
  nic->pd = ibv_alloc_pd(nic->ctx);
  if (!nic->pd) verbs_fail("allocating a protection domain on " + nic->where(), errno);
  ibv_pd* pd = nic->pd;
  std::string where = nic->where();
  nic->cache = std::make_unique<RegCache>(
      [pd, where](void* addr, size_t len) {
        ibv_mr* mr = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!mr) verbs_fail("registering " + std::to_string(len) + " bytes on " + where, errno);
        Region r;
        r.lkey = mr->lkey;
        r.rkey = mr->rkey;
        r.handle = mr;
        return r;
      },
      [](const Region& r) { ibv_dereg_mr(static_cast<ibv_mr*>(r.handle)); });
  return nic;
}

struct Tuning {
  uint32_t slots;
  size_t slot_bytes;
  int timeout, retry_cnt;
};

enum WrKind : uint64_t { kWrWrite = 0, kWrCredit = 1, kWrRecv = 2 };

// One RC queue pair on one NIC, with its memory: receive ring (the peer writes into it),
// send ring (chunks copied here are written from here), the credit word the peer writes,
// and the source of our credit writes. One allocation, registered once via the NIC's cache.
class VerbsQp final : public QpOps {
 public:
  VerbsQp(std::shared_ptr<Nic> nic, const Tuning& t) : nic_(std::move(nic)), t_(t) {
    ring_bytes_ = static_cast<size_t>(t.slots) * t.slot_bytes;
    mem_bytes_ = 2 * ring_bytes_ + 128;
    mem_ = static_cast<char*>(std::aligned_alloc(4096, (mem_bytes_ + 4095) & ~size_t(4095)));
    if (!mem_) throw SystemError("ibverbs: out of memory for the rings");
    std::memset(mem_ + 2 * ring_bytes_, 0, 128);
    reg_ = &nic_->cache->acquire(mem_, mem_bytes_);
    int cqe = static_cast<int>(2 * t.slots + 8);
    cq_ = ibv_create_cq(nic_->ctx, cqe, nullptr, nullptr, 0);
    if (!cq_) verbs_fail("creating a completion queue on " + where(), errno);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = t.slots + 2;
    qa.cap.max_recv_wr = t.slots + 2;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(nic_->pd, &qa);
    if (!qp_) verbs_fail("creating a queue pair on " + where(), errno);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(nic_->port);
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      verbs_fail("moving a queue pair on " + where() + " to INIT", e);
    std::random_device rd;
    psn_ = rd() & 0xffffff;
    for (uint32_t i = 0; i < t.slots; ++i) post_recv();
  }

  ~VerbsQp() override {
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    nic_->cache->release(*reg_);
    nic_->cache->invalidate(mem_, mem_bytes_);
    std::free(mem_);
  }

  QpInfo info() const {
    QpInfo q;
    q.qpn = qp_->qp_num;
    q.psn = psn_;
    q.lid = nic_->attr.lid;
    q.port = static_cast<uint8_t>(nic_->port);
    q.link_layer = nic_->link_layer;
    q.mtu = static_cast<uint8_t>(nic_->attr.active_mtu);
    q.gid_index = static_cast<uint8_t>(nic_->gid_index);
    std::memcpy(q.gid, nic_->gid.raw, 16);
    q.ring_addr = reinterpret_cast<uintptr_t>(mem_);
    q.ring_rkey = reg_->rkey;
    q.nslots = t_.slots;
    q.slot_bytes = static_cast<uint32_t>(t_.slot_bytes);
    q.credit_addr = reinterpret_cast<uintptr_t>(credit_in());
    q.credit_rkey = reg_->rkey;
    q.device = nic_->dev;
    return q;
  }

  void connect(const QpInfo& r, const std::string& peer) {
    if (r.link_layer != nic_->link_layer)
      throw SystemError("ibverbs: " + where() + " is " + (nic_->link_layer == kLinkIb ? "InfiniBand" : "Ethernet (RoCE)") +
                        " but " + peer + "'s " + r.device + ":" + std::to_string(r.port) + " is not");
    remote_ = r;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(r.mtu, nic_->attr.active_mtu));
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(nic_->port);
    a.ah_attr.dlid = r.lid;
    a.ah_attr.sl = 0;
    if (nic_->link_layer == kLinkEthernet) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(nic_->gid_index);
      a.ah_attr.grh.hop_limit = 255;
    }
    if (int e = ibv_modify_qp(qp_, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      verbs_fail("moving the queue pair on " + where() + " to " + peer + " to RTR", e);
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = static_cast<uint8_t>(t_.timeout);
    s.retry_cnt = static_cast<uint8_t>(t_.retry_cnt);
    s.rnr_retry = 7;
    s.sq_psn = psn_;
    s.max_rd_atomic = 1;
    if (int e = ibv_modify_qp(qp_, &s,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
      verbs_fail("moving the queue pair on " + where() + " to " + peer + " to RTS", e);
  }

  uint32_t send_slots() const override { return t_.slots; }
  uint32_t recv_slots() const override { return t_.slots; }
  uint32_t remote_slots() const override { return remote_.nslots; }
  char* send_buf(uint32_t slot) override { return mem_ + ring_bytes_ + static_cast<size_t>(slot) * t_.slot_bytes; }
  const char* recv_buf(uint32_t slot) override { return mem_ + static_cast<size_t>(slot) * t_.slot_bytes; }

  void post_write(uint32_t local, uint32_t remote, uint32_t len) override {
    post_rdma_write(kWrWrite, send_buf(local), len, remote_.ring_addr + static_cast<uint64_t>(remote) * remote_.slot_bytes,
                    remote_.ring_rkey, len, "an RDMA write");
  }

  void post_credit(uint64_t consumed) override {
    // Only one credit write is in flight at a time (RecvWindow), so its source is stable.
    *credit_src() = consumed;
    post_rdma_write(kWrCredit, credit_src(), 8, remote_.credit_addr, remote_.credit_rkey, std::nullopt, "a credit write");
  }

  uint64_t read_credit() const override { return __atomic_load_n(credit_in(), __ATOMIC_ACQUIRE); }

  void post_recv() override {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kWrRecv;
    wr.num_sge = 0;  // a write with immediate carries its data to the address it names
    if (int e = ibv_post_recv(qp_, &wr, &bad)) verbs_fail("posting a receive on " + where(), e);
  }

  int poll(Completion* out, int max) override {
    ibv_wc wc[32];
    int n = ibv_poll_cq(cq_, std::min(max, 32), wc);
    if (n < 0) verbs_fail("polling the completion queue of " + where(), EIO);
    for (int i = 0; i < n; ++i) {
      Completion& c = out[i];
      c.kind = wc[i].wr_id == kWrWrite ? Completion::write : wc[i].wr_id == kWrCredit ? Completion::credit : Completion::recv;
      c.ok = wc[i].status == IBV_WC_SUCCESS;
      c.imm = c.kind == Completion::recv && c.ok ? ntohl(wc[i].imm_data) : 0;
      c.error.clear();
      if (!c.ok) {
        char vendor[32];
        std::snprintf(vendor, sizeof vendor, " (vendor error 0x%x)", wc[i].vendor_err);
        c.error = std::string(ibv_wc_status_str(wc[i].status)) + vendor;
      }
    }
    return n;
  }

  std::string where() const override { return nic_->where(); }

 private:
  // One signalled RDMA write of `len` registered bytes at `src` to the peer's `raddr`, with
  // immediate `imm` when there is one; `what` names it if posting fails.
  void post_rdma_write(uint64_t wr_id, const void* src, uint32_t len, uint64_t raddr, uint32_t rkey,
                       std::optional<uint32_t> imm, const char* what) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), len, reg_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (imm) wr.imm_data = htonl(*imm);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (int e = ibv_post_send(qp_, &wr, &bad)) verbs_fail(std::string("posting ") + what + " on " + where(), e);
  }

  uint64_t* credit_in() const { return reinterpret_cast<uint64_t*>(mem_ + 2 * ring_bytes_); }
  uint64_t* credit_src() const { return reinterpret_cast<uint64_t*>(mem_ + 2 * ring_bytes_ + 64); }

  std::shared_ptr<Nic> nic_;
  Tuning t_;
  size_t ring_bytes_ = 0, mem_bytes_ = 0;
  char* mem_ = nullptr;
  const Region* reg_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  QpInfo remote_;
};

// local_info creates the queue pairs for a peer and encodes their connection info;
// connect connects them from what the peer sent.
class IbSetup final : public LinkSetup {
 public:
  IbSetup(std::vector<std::shared_ptr<Nic>> nics, const Tuning& t) : nics_(std::move(nics)), t_(t) {
    desc_ = std::to_string(t_.slots) + " x " + std::to_string(t_.slot_bytes) + " B slots over";
    for (auto& n : nics_) desc_ += " " + n->where();
  }

  std::vector<char> local_info(int peer) override {
    ConnInfo info;
    auto& qps = pending_[peer];
    for (auto& nic : nics_) {
      qps.push_back(std::make_unique<VerbsQp>(nic, t_));
      info.qps.push_back(qps.back()->info());
    }
    return encode(info);
  }

  std::unique_ptr<Link> connect(int peer, const std::vector<char>& blob) override {
    std::string who = "rank " + std::to_string(peer);
    ConnInfo remote = decode(blob.data(), blob.size(), who);
    auto& mine = pending_[peer];
    size_t nq = std::min(mine.size(), remote.qps.size());
    size_t chunk = t_.slot_bytes;
    for (size_t i = 0; i < nq; ++i) chunk = std::min<size_t>(chunk, remote.qps[i].slot_bytes);
    std::vector<std::unique_ptr<QpOps>> ops;
    for (size_t i = 0; i < nq; ++i) {
      mine[i]->connect(remote.qps[i], who);
      ops.push_back(std::move(mine[i]));
    }
    pending_.erase(peer);  // queue pairs beyond the peer's NIC count are not used
    return std::make_unique<IbLink>(peer, std::move(ops), chunk, std::max<uint32_t>(1, t_.slots / 4));
  }

  std::string describe(int) const override { return desc_; }

 private:
  std::vector<std::shared_ptr<Nic>> nics_;
  Tuning t_;
  std::map<int, std::vector<std::unique_ptr<VerbsQp>>> pending_;
  std::string desc_;
};

// At least one active port matches STRATA_IB_HCA (probed once per process).
bool device_available() { return !selected_ports(nullptr).empty(); }

void require_device() {
  std::string why;
  if (selected_ports(&why).empty())
    throw SystemError("STRATA_TRANSPORT=ibverbs, but there is no usable RDMA device: " + why +
                      "; unset STRATA_TRANSPORT or choose tcp, shm or ucx");
}

// Opens the ports and allocates their resources.
std::unique_ptr<LinkSetup> create_setup(const SetupContext&) {
  std::string why;
  std::vector<PortId> ports = selected_ports(&why);
  if (ports.empty()) require_device();
  int gid_index = static_cast<int>(settings::integer("STRATA_IB_GID_INDEX"));
  Tuning t;
  t.slots = static_cast<uint32_t>(settings::integer("STRATA_IB_SLOTS"));
  t.slot_bytes = static_cast<size_t>(settings::integer("STRATA_IB_CHUNK_BYTES")) & ~size_t(63);
  t.timeout = static_cast<int>(settings::integer("STRATA_IB_TIMEOUT"));
  t.retry_cnt = static_cast<int>(settings::integer("STRATA_IB_RETRY_CNT"));
  static_assert(kMaxQps == 16, "STRATA_IB_MAX_NICS's range in ground/settings.cpp is [1, kMaxQps]");
  int max_nics = static_cast<int>(settings::integer("STRATA_IB_MAX_NICS"));
  std::vector<std::shared_ptr<Nic>> nics;
  for (const PortId& id : ports) {
    if (static_cast<int>(nics.size()) == max_nics) break;
    nics.push_back(open_nic(id, gid_index));
  }
  return std::make_unique<IbSetup>(std::move(nics), t);
}

}  // namespace

}  // namespace strata::ibverbs

namespace strata {
const LinkSetupTransport kIbverbsTransport{&ibverbs::device_available, &ibverbs::require_device, &ibverbs::create_setup};
}  // namespace strata
