// Built without UCX: the transport reports that it is missing.
#include "strata/error.hpp"
#include "transports/link_setup.hpp"

namespace strata {

namespace {
void missing() {
  throw SystemError("STRATA_TRANSPORT=ucx, but Strata was built without UCX (install libucx-dev and rebuild)");
}
}  // namespace

const LinkSetupTransport kUcxTransport = kBuiltWithout<&missing>;

}  // namespace strata
