// The transport table: every transport is one row saying which pairs of ranks it can
// serve, which memory kinds its links carry, how STRATA_TRANSPORT forces it, and how it
// builds its links (transports/link_setup.hpp). Both ranks of a pair choose from the
// table alike, given what each offered the other (docs/transports.md, "Choosing a
// transport per pair").
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ground/memory_kind.hpp"
#include "ground/settings.hpp"
#include "transports/link_setup.hpp"

namespace strata {

// Which pairs a row serves when nothing forces a transport (and, with an offer_bit, only
// where both ranks offered that capability).
enum class Reach : uint8_t {
  same_host,  // the two ranks have the same host identity
  anywhere,
};

// What STRATA_TRANSPORT naming the row means.
enum class Forcing : uint8_t {
  means_auto,   // nothing: the row is chosen where it serves anyway (shm)
  either_side,  // every pair where either rank names it (tcp)
  every_rank,   // every pair, and every rank must name it (ucx, ibverbs)
  never,        // the setting cannot name it: it is about host links (ipc, staging)
};

// The capabilities a rank offers, one bit each (TransportOffer::caps).
inline constexpr uint8_t kOfferUcxRdma = 1;  // UCX reports an RDMA transport
inline constexpr uint8_t kOfferIbPort = 2;   // an ibverbs port is usable
inline constexpr uint8_t kOfferDevice = 4;   // this process can have a device backend

struct TransportRow {
  const char* name;      // STRATA_TRANSPORT's value, and the links' name
  uint8_t id;            // in the offer (0 is auto)
  MemoryKinds memory;    // the kinds of memory its links carry
  Reach reach;
  uint8_t offer_bit;     // nonzero: serves only pairs where both offered this capability
  Forcing forcing;
  bool handshake;        // links are made from connection info sent over the control socket
  const LinkSetupTransport* transport;
};

// The rows in the order they are tried for a pair, which is also the order every rank sets
// them up in.
std::span<const TransportRow> transport_table();
// The row STRATA_TRANSPORT (`cfg.transport`) names, or null for auto.
const TransportRow* row_named(const std::string& name);

// Sent on every control socket once it is up: what this rank asks for and can do.
struct TransportOffer {
  uint32_t magic;  // "STXO"
  uint8_t version;
  uint8_t wanted;  // the id of the row STRATA_TRANSPORT forces; 0: auto (also for shm)
  uint8_t caps;    // offer_bit of every row whose capability this rank has
  uint8_t pad;
  static constexpr uint32_t kMagic = 0x4f585453;  // "STXO"
  bool valid() const { return magic == kMagic && version == 1; }
};
static_assert(sizeof(TransportOffer) == 8);

// This rank's offer. RDMA is probed (once per process) only when nothing is forced and
// some peer is on another host (`remote_peer`); whether a device backend can exist here
// is asked always (it makes no backend: ground/device/backend.hpp's backend_possible).
TransportOffer make_offer(const Config& cfg, bool remote_peer);

// The row that carries `kind` between ranks `ra` and `rb` (ra < rb, offers oa and ob), the
// same on both ends; null when no row carries `kind` between them. A forced row applies to
// the kinds it carries. Throws InvalidArgument when one rank forces an every_rank row and
// the other does not name the same.
const TransportRow* choose(MemoryKind kind, bool same_host, const TransportOffer& oa, const TransportOffer& ob, int ra,
                           int rb);

}  // namespace strata
