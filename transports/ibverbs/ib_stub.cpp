// Built without libibverbs: the transport is never available and says why when forced.
#include "ground/log.hpp"
#include "strata/error.hpp"
#include "transports/ibverbs/ib_transport.hpp"

namespace strata::ibverbs {

bool built() { return false; }
bool device_available() { return false; }

void require_device() {
  throw SystemError("STRATA_TRANSPORT=ibverbs, but Strata was built without libibverbs (install libibverbs-dev and rebuild)");
}

std::unique_ptr<Setup> Setup::create(int, int, const Config&) {
  require_device();
  return nullptr;
}

}  // namespace strata::ibverbs
