#include "transports/transport_table.hpp"

#include "strata/error.hpp"

namespace strata {

namespace {

constexpr MemoryKinds kHost{MemoryKind::host};
constexpr MemoryKinds kDevice{MemoryKind::device};

// Host memory: shared memory on one host comes first; between hosts RDMA where both ends
// have it (UCX first); tcp serves every pair the others do not. Device memory: IPC on one
// host, staging through the pair's host link between hosts, where both ends can have a
// device backend.
constexpr TransportRow kRows[] = {
    {"shm", 1, kHost, Reach::same_host, 0, Forcing::means_auto, true, &kShmTransport},
    {"ucx", 3, kHost, Reach::anywhere, kOfferUcxRdma, Forcing::every_rank, true, &kUcxTransport},
    {"ibverbs", 4, kHost, Reach::anywhere, kOfferIbPort, Forcing::every_rank, true, &kIbverbsTransport},
    {"tcp", 2, kHost, Reach::anywhere, 0, Forcing::either_side, false, &kTcpTransport},
    {"ipc", 5, kDevice, Reach::same_host, kOfferDevice, Forcing::never, true, &kIpcTransport},
    {"staging", 6, kDevice, Reach::anywhere, kOfferDevice, Forcing::never, true, &kStagingTransport},
};

const TransportRow* row_with_id(uint8_t id) {
  for (const TransportRow& r : kRows)
    if (id != 0 && r.id == id) return &r;
  return nullptr;
}

bool forces(const TransportRow& r) { return r.forcing == Forcing::either_side || r.forcing == Forcing::every_rank; }

const char* wanted_name(uint8_t id) {
  const TransportRow* r = row_with_id(id);
  return r && forces(*r) ? r->name : "auto";
}

bool serves(const TransportRow& r, bool same_host, const TransportOffer& oa, const TransportOffer& ob) {
  if (r.reach == Reach::same_host && !same_host) return false;
  return r.offer_bit == 0 || (oa.caps & ob.caps & r.offer_bit) != 0;
}

}  // namespace

std::span<const TransportRow> transport_table() { return kRows; }

const TransportRow* row_named(const std::string& name) {
  for (const TransportRow& r : kRows)
    if (name == r.name) return &r;
  return nullptr;
}

TransportOffer make_offer(const Config& cfg, bool remote_peer) {
  const TransportRow* forced = row_named(cfg.transport);
  TransportOffer o{TransportOffer::kMagic, 1, 0, 0, 0};
  if (forced && forces(*forced)) o.wanted = forced->id;
  for (const TransportRow& r : kRows) {
    if (!r.offer_bit || !r.transport->offers || (o.caps & r.offer_bit)) continue;
    // RDMA matters only between hosts and when no host transport is forced; device rows
    // carry no host memory, which is all STRATA_TRANSPORT is about.
    const bool device_row = !r.memory.has(MemoryKind::host);
    if ((device_row || (o.wanted == 0 && remote_peer)) && r.transport->offers()) o.caps |= r.offer_bit;
  }
  return o;
}

const TransportRow* choose(MemoryKind kind, bool same_host, const TransportOffer& oa, const TransportOffer& ob, int ra,
                           int rb) {
  const TransportRow* fa = row_with_id(oa.wanted);
  const TransportRow* fb = row_with_id(ob.wanted);
  for (const TransportRow* f : {fa, fb})
    if (f && f->forcing == Forcing::every_rank && f->memory.has(kind)) {
      if (oa.wanted != ob.wanted)
        throw InvalidArgument(std::string("STRATA_TRANSPORT is ") + wanted_name(oa.wanted) + " on rank " +
                              std::to_string(ra) + " but " + wanted_name(ob.wanted) + " on rank " + std::to_string(rb) +
                              "; set the same value on every rank");
      return f;
    }
  for (const TransportRow* f : {fa, fb})
    if (f && f->forcing == Forcing::either_side && f->memory.has(kind)) return f;
  for (const TransportRow& r : kRows)
    if (r.memory.has(kind) && serves(r, same_host, oa, ob)) return &r;
  return nullptr;
}

}  // namespace strata
