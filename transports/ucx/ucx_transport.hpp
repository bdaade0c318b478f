// UCX transport: what connection setup (src/mesh.cpp) needs. One Setup per communicator
// owns the UCP context and worker shared by that communicator's links; each peer's link is
// made from the worker address it sent over the control socket.
#pragma once

#include <memory>
#include <vector>

#include "ground/env.hpp"
#include "transports/transport.hpp"

namespace strata::ucx {

// Strata was built with UCX (libucp found at configure time).
bool built();
// UCX offers an RDMA transport (rc/dc/ud over InfiniBand or RoCE) on this host. Probed
// once per process and cached; false when built without UCX.
bool rdma_capable();

// Sends each peer this worker's address.
class Setup : public LinkSetup {
 public:
  // Creates the communicator's UCP context and worker. Throws SystemError when UCX cannot
  // be initialised (or Strata was built without it).
  static std::unique_ptr<Setup> create(int rank, int nranks, const Config& cfg);
};

}  // namespace strata::ucx
