// Transports whose links are made from connection info each side sends the other over its
// control socket (ucx, ibverbs), as connection setup (core/mesh.cpp) sees them.
#pragma once

#include <memory>
#include <vector>

#include "ground/settings.hpp"
#include "transports/transport.hpp"

namespace strata {

// One per communicator.
class LinkSetup {
 public:
  virtual ~LinkSetup() = default;
  // The bytes to send to `peer` (e.g. a worker address, queue-pair numbers); `same_host`:
  // the peer shares this host.
  virtual std::vector<char> local_info(int peer, bool same_host) = 0;
  // The link to `peer` from what it sent (checked; SystemError if malformed); `same_host`:
  // the peer shares this host.
  virtual std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote, bool same_host) = 0;
  // Describes the links for the INFO line, e.g. "chunk 1048576 B".
  virtual const char* describe() const = 0;
};

// What a transport connected through a LinkSetup offers. Each is defined once by its folder:
// over its library when that was found at configure time, else by a stub that says the
// library is missing.
struct LinkSetupTransport {
  // It reaches other hosts over RDMA from here (ucx: UCX reports an RDMA transport;
  // ibverbs: an active port matches STRATA_IB_HCA). Probed once per process and cached,
  // saying at INFO level why not; false without the library. May throw InvalidArgument for
  // malformed settings.
  bool (*rdma)();
  // For STRATA_TRANSPORT naming it: throws SystemError saying why it cannot work here.
  void (*require)();
  // The communicator's setup. Throws SystemError when the transport cannot be initialised
  // (the message says why), InvalidArgument for malformed STRATA_* values.
  std::unique_ptr<LinkSetup> (*create)(int rank, int nranks, const Config& cfg);
};

extern const LinkSetupTransport kUcxTransport;      // transports/ucx
extern const LinkSetupTransport kIbverbsTransport;  // transports/ibverbs

// The stub of a transport built without its library: it never offers RDMA, and forcing or
// creating it calls `missing`, which throws a SystemError saying what to install.
template <void (*missing)()>
inline constexpr LinkSetupTransport kBuiltWithout{
    [] { return false; },
    missing,
    [](int, int, const Config&) -> std::unique_ptr<LinkSetup> {
      missing();
      return nullptr;
    },
};

}  // namespace strata
