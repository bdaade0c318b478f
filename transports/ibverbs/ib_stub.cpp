// Built without libibverbs: the transport is never available and says why when forced.
#include "strata/error.hpp"
#include "transports/link_setup.hpp"

namespace strata {

namespace {
void require_ibverbs() {
  throw SystemError("STRATA_TRANSPORT=ibverbs, but Strata was built without libibverbs (install libibverbs-dev and rebuild)");
}
}  // namespace

const LinkSetupTransport kIbverbsTransport{
    [] { return false; },
    &require_ibverbs,
    [](int, int, const Config&) -> std::unique_ptr<LinkSetup> {
      require_ibverbs();
      return nullptr;
    },
};

}  // namespace strata
