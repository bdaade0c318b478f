// Built without UCX: the transport reports that it is missing.
#include "strata/error.hpp"
#include "transports/link_setup.hpp"

namespace strata {

namespace {
void require_ucx() {
  throw SystemError("STRATA_TRANSPORT=ucx, but Strata was built without UCX (install libucx-dev and rebuild)");
}
}  // namespace

const LinkSetupTransport kUcxTransport{
    [] { return false; },
    &require_ucx,
    [](int, int, const Config&) -> std::unique_ptr<LinkSetup> {
      require_ucx();
      return nullptr;
    },
};

}  // namespace strata
