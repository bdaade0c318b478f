// Built without libibverbs: the transport is never available and says why when forced.
#include "strata/error.hpp"
#include "transports/link_setup.hpp"

namespace strata {

namespace {
void missing() {
  throw SystemError("STRATA_TRANSPORT=ibverbs, but Strata was built without libibverbs (install libibverbs-dev and rebuild)");
}
}  // namespace

const LinkSetupTransport kIbverbsTransport = kBuiltWithout<&missing>;

}  // namespace strata
