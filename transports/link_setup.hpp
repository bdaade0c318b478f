// How a transport builds the links of one communicator: the one interface every row of
// the transport table (transports/transport_table.hpp) connects through, as connection
// setup (core/mesh.cpp) drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ground/memory_kind.hpp"
#include "ground/settings.hpp"
#include "ground/socket.hpp"
#include "transports/transport.hpp"

namespace strata {

// What a transport's setup is told about the communicator, for one memory kind.
struct SetupContext {
  int rank = 0, nranks = 0;
  const Config* cfg = nullptr;
  MemoryKind memory = MemoryKind::host;
  std::vector<int> peers;              // the ranks this row may come to serve, in rank order
  std::vector<bool> same_host;         // by rank: has this rank's host identity
  std::vector<std::string> address;    // by rank: where it listens (for INFO lines)
  const uint8_t* secret = nullptr;     // the communicator's 16-byte secret and its tag: names
  uint64_t comm_tag = 0;               // unique to the communicator (shm's segments)
  // By rank: the data sockets the connector called or took beside the control socket
  // (tcp's). They outlive the setup.
  std::vector<std::vector<net::Fd>>* sockets = nullptr;
  // By rank: the links that carry host memory, made before any device row's link of the
  // same pair (staging wraps them; they outlive the links made from this context).
  const std::vector<std::unique_ptr<Link>>* host_links = nullptr;
};

// One per communicator, memory kind and transport, made when the first pair needs the
// row. Pairs connect on need (core/connector.hpp), each on its own, in this order on both
// ends of the pair:
//   1. handshake rows: local_info(peer) is sent to the peer over the control socket, and
//      connect(peer, what the peer sent) makes the link; other rows (tcp): connect(peer, {})
//      once the pair's data sockets are there;
//   2. the pair then sends a token carrying connected_note(peer), and the link is used once
//      the peer's token has arrived (peer_connected(peer, its note)): neither end sends
//      data, or tears its side down, before the other has made its link.
// connect() may return null, meaning "not yet": it is called again (ipc waits for the
// lower rank's socket this way). A pair never waits on another pair's setup.
class LinkSetup {
 public:
  virtual ~LinkSetup() = default;
  // The bytes to send `peer` (a worker address, queue-pair numbers, a ring's index).
  virtual std::vector<char> local_info(int peer) { return {}; }
  // The link to `peer` from what it sent (checked; SystemError if malformed), or null: not
  // yet, call again.
  virtual std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) = 0;
  // A byte this end tells `peer` once its link is made, and what the peer's said.
  virtual uint8_t connected_note(int peer) { return 0; }
  virtual void peer_connected(int peer, uint8_t note) {}
  // The link to `peer` for the INFO line, e.g. "chunk 1048576 B".
  virtual std::string describe(int peer) const = 0;
};

// What a transport's folder provides to its row of the table. The ucx and ibverbs ones are
// defined over their library when it was found at configure time, else by a stub that says
// the library is missing.
struct LinkSetupTransport {
  // It reaches other hosts over RDMA from here (ucx: UCX reports an RDMA transport;
  // ibverbs: an active port matches STRATA_IB_HCA): the capability a row that serves
  // pairs where both offer it puts in the offer. Probed once per process and cached,
  // saying at INFO level why not; false without the library. May throw InvalidArgument
  // for malformed settings. Null: nothing to offer.
  bool (*offers)();
  // For STRATA_TRANSPORT naming it: throws SystemError saying why it cannot work here.
  // Null: it always can.
  void (*require)();
  // The communicator's setup. Throws SystemError when the transport cannot be initialised
  // (the message says why), InvalidArgument for malformed STRATA_* values.
  std::unique_ptr<LinkSetup> (*create)(const SetupContext& ctx);
};

extern const LinkSetupTransport kShmTransport;      // transports/shm
extern const LinkSetupTransport kTcpTransport;      // transports/tcp
extern const LinkSetupTransport kUcxTransport;      // transports/ucx
extern const LinkSetupTransport kIbverbsTransport;  // transports/ibverbs
extern const LinkSetupTransport kIpcTransport;      // transports/ipc
extern const LinkSetupTransport kStagingTransport;  // transports/staging

// A transport that needs no library: its setup is a `Setup`, made from the context, and
// it offers what `offers` says (ipc, staging: a device backend may exist), or nothing.
template <class Setup, bool (*offers)()>
inline constexpr LinkSetupTransport kOffering{
    offers,
    nullptr,
    [](const SetupContext& ctx) -> std::unique_ptr<LinkSetup> { return std::make_unique<Setup>(ctx); },
};
// One that offers no capability (shm, tcp).
template <class Setup>
inline constexpr LinkSetupTransport kAlwaysThere = kOffering<Setup, nullptr>;

// The stub of a transport built without its library: it never offers RDMA, and forcing or
// creating it calls `missing`, which throws a SystemError saying what to install.
template <void (*missing)()>
inline constexpr LinkSetupTransport kBuiltWithout{
    [] { return false; },
    missing,
    [](const SetupContext&) -> std::unique_ptr<LinkSetup> {
      missing();
      return nullptr;
    },
};

}  // namespace strata
