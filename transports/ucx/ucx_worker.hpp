// UCX transport: the communicator's UCP context and worker, shared by its links; endpoint
// error state; put regions. Internal to transports/ucx.
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace strata::ucx {

inline std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

// What the endpoint error callback writes; owned by the worker so that a callback arriving
// while the endpoint is being closed (after its link is gone) still has somewhere to go.
struct EpState {
  int peer;
  ucs_status_t status = UCS_OK;
};

// The communicator's UCP context and worker. The last link to go closes the endpoints
// (flushing what is still in flight, for a bounded time) and destroys both.
// UCX offers an RDMA transport (rc/dc/ud over InfiniBand or RoCE) on this host. Probed
// once per process and cached.
bool rdma_capable();

class Worker {
 public:
  explicit Worker(int nranks);
  ~Worker();

  EpState* ep_state(int peer) { return &states_.emplace_back(EpState{peer}); }

  // Memory UCX allocates, mapped until the worker goes: where a peer can put into it
  // (shared memory on one host, registered memory with RDMA), with its packed remote key,
  // or a staging buffer for tag receives.
  struct Region {
    ucp_mem_h memh = nullptr;
    char* base = nullptr;
    std::vector<char> rkey;
  };
  Region map_region(size_t bytes);
  void retire(ucp_ep_h ep, bool failed) { eps_.push_back({ep, failed}); }

  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<char> address;

 private:
  std::deque<EpState> states_;  // stable addresses
  std::vector<std::pair<ucp_ep_h, bool>> eps_;
  std::vector<ucp_mem_h> mem_;
};

}  // namespace strata::ucx
