// Built without UCX: the transport reports that it is missing.
#include "strata/error.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace strata::ucx {

bool built() { return false; }
bool rdma_capable() { return false; }

std::unique_ptr<Setup> Setup::create(int, int, const Config&) {
  throw SystemError("STRATA_TRANSPORT=ucx, but Strata was built without UCX (install libucx-dev and rebuild)");
}

}  // namespace strata::ucx
