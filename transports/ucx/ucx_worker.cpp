// UCX transport: the UCP context and worker (configuration, teardown), put regions, and
// the probe for RDMA devices.
#include "transports/ucx/ucx_worker.hpp"

#include <uct/api/uct.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "ground/log.hpp"
#include "strata/error.hpp"
#include "transports/ucx/ucx_config.hpp"

namespace strata::ucx {

namespace {

using Clock = std::chrono::steady_clock;

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

Worker::Worker(int nranks) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);  // UCX_* from the environment
  if (st != UCS_OK) throw SystemError("UCX: reading the configuration failed: " + status_text(st));
  avoid_tcp_zero_copy(config);
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  p.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
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

Worker::~Worker() {
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
  for (ucp_mem_h memh : mem_) ucp_mem_unmap(ctx, memh);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
}

Worker::Region Worker::map_region(size_t bytes) {
  Region r;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = nullptr;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t st = ucp_mem_map(ctx, &mp, &r.memh);
  if (st != UCS_OK) throw SystemError("UCX: allocating a " + std::to_string(bytes) + "-byte put region failed: " + status_text(st));
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  void* packed = nullptr;
  size_t len = 0;
  if ((st = ucp_mem_query(r.memh, &attr)) != UCS_OK || (st = ucp_rkey_pack(ctx, r.memh, &packed, &len)) != UCS_OK) {
    ucp_mem_unmap(ctx, r.memh);
    throw SystemError("UCX: preparing the put region failed: " + status_text(st));
  }
  r.base = static_cast<char*>(attr.address);
  r.rkey.assign(static_cast<char*>(packed), static_cast<char*>(packed) + len);
  ucp_rkey_buffer_release(packed);
  mem_.push_back(r.memh);
  return r;
}

bool rdma_capable() {
  static std::once_flag once;
  static bool result = false;
  std::call_once(once, [] {
    result = probe_rdma();
    if (!result) STRATA_INFO("UCX reports no RDMA-capable device; it is not the default between hosts");
  });
  return result;
}

}  // namespace strata::ucx
