// ibverbs transport: what connection setup (src/mesh.cpp) needs. One Setup per
// communicator opens the chosen ports (STRATA_IB_HCA); each peer's link is a set of RC queue
// pairs, one per port (striped), connected from the info the peer sent over the control
// socket (transports/ibverbs/ib_wire.hpp).
#pragma once

#include <memory>
#include <vector>

#include "ground/env.hpp"
#include "transports/transport.hpp"

namespace strata::ibverbs {

// Strata was built with libibverbs.
bool built();
// At least one active port matches STRATA_IB_HCA. Probed once per process; when there is
// none, says so once at INFO level. Throws InvalidArgument for a malformed STRATA_IB_HCA.
bool device_available();
// For STRATA_TRANSPORT=ibverbs: throws SystemError saying why when device_available() is false.
void require_device();

// local_info creates the queue pairs for a peer and encodes their connection info;
// connect connects them from what the peer sent.
class Setup : public LinkSetup {
 public:
  // Opens the ports and allocates their resources. Throws SystemError when there is no
  // usable device (the message says why), InvalidArgument for malformed STRATA_IB_* values.
  static std::unique_ptr<Setup> create(int rank, int nranks, const Config& cfg);
};

}  // namespace strata::ibverbs
