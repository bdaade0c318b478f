#include "core/mesh.hpp"

#include <cstdio>
#include <cstring>

#include "ground/log.hpp"
#include "transports/link_setup.hpp"
#include "transports/shm/shm_link.hpp"
#include "transports/shm/shm_names.hpp"
#include "transports/tcp/tcp_link.hpp"

namespace strata {

using bootstrap::RankInfo;

bool use_shm(const RankInfo& a, const RankInfo& b) {
  return !a.force_tcp && !b.force_tcp && std::strncmp(a.host, b.host, sizeof a.host) == 0;
}

namespace {

int data_sockets(const RankInfo& a, const RankInfo& b) {
  return use_shm(a, b) ? 0 : std::min(a.tcp_nsocks, b.tcp_nsocks);
}

std::string peer_name(int r) { return "rank " + std::to_string(r); }

// Shared-memory peers of `r`, in rank order: ring i of r's segment receives from peer i.
std::vector<int> shm_peers(int r, const std::vector<RankInfo>& table) {
  std::vector<int> out;
  for (int j = 0; j < static_cast<int>(table.size()); ++j)
    if (j != r && use_shm(table[r], table[j])) out.push_back(j);
  return out;
}

int index_of(const std::vector<int>& v, int x) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) return static_cast<int>(i);
  return -1;
}

std::string segment_name(const bootstrap::Secret& s, uint64_t tag, int rank) {
  char hex[13], rest[48];
  for (int i = 0; i < 6; ++i) std::snprintf(hex + 2 * i, 3, "%02x", s.bytes[i]);
  std::snprintf(rest, sizeof rest, "%llx-%d", static_cast<unsigned long long>(tag), rank);
  return "/" + shm_job_prefix(hex) + rest;
}

// Everyone in `peers` sends us `token` and we send it to them.
void exchange_token(Mesh& m, const std::vector<int>& peers, char token, net::Deadline deadline) {
  for (int j : peers) net::send_all(m.control[j].get(), &token, 1, deadline, peer_name(j));
  for (int j : peers) {
    char got = 0;
    net::recv_all(m.control[j].get(), &got, 1, deadline, peer_name(j));
    if (got != token) throw SystemError("unexpected setup message from " + peer_name(j));
  }
}

void connect_shm(Mesh& m, int rank, const std::vector<RankInfo>& table, const bootstrap::Secret& secret,
                 uint64_t tag, const Config& cfg, net::Deadline deadline) {
  std::vector<int> mine = shm_peers(rank, table);
  if (mine.empty()) return;
  auto own = ShmSegment::create(segment_name(secret, tag, rank), static_cast<int>(mine.size()), cfg.shm_ring_bytes);
  exchange_token(m, mine, 'S', deadline);  // every segment exists
  for (int j : mine) {
    auto theirs = ShmSegment::open(segment_name(secret, tag, j));
    int me_there = index_of(shm_peers(j, table), rank);
    if (me_there < 0 || me_there >= theirs->nrings()) throw InternalError("shared memory layout mismatch with " + peer_name(j));
    ShmRing* out = theirs->ring(me_there);
    ShmRing* in = own->ring(index_of(mine, j));
    m.links[j] = std::make_unique<ShmLink>(j, out, in, std::move(theirs), own);
  }
  exchange_token(m, mine, 'M', deadline);  // every peer has mapped ours
  own->unlink();
}

// ---- data transport per pair, agreed over the control sockets ----

enum Kind : uint8_t { kAuto = 0, kShm = 1, kTcp = 2, kUcx = 3, kIbverbs = 4 };
const char* kind_name(uint8_t k) {
  switch (k) {
    case kShm: return "shm";
    case kTcp: return "tcp";
    case kUcx: return "ucx";
    case kIbverbs: return "ibverbs";
  }
  return "auto";
}

// Sent on every control socket once it is up: what this rank asks for and can do.
struct Offer {
  uint32_t magic;  // "STXO"
  uint8_t version;
  uint8_t wanted;  // STRATA_TRANSPORT as a Kind (shm means auto)
  uint8_t caps;    // kCapUcxRdma | kCapIbDevice
  uint8_t pad;
};
static_assert(sizeof(Offer) == 8);
constexpr uint32_t kOfferMagic = 0x4f585453;  // "STXO"
constexpr uint8_t kCapUcxRdma = 1, kCapIbDevice = 2;

uint8_t wanted_kind(const Config& cfg) {
  if (cfg.transport == "tcp") return kTcp;
  if (cfg.transport == "ucx") return kUcx;
  if (cfg.transport == "ibverbs") return kIbverbs;
  return kAuto;
}

// Both ranks of a pair compute the same answer from the same two offers. ucx and ibverbs
// are used between every pair when forced (all ranks must agree), and by default between
// hosts when both ends have RDMA (UCX first); otherwise shared memory on one host, else tcp.
uint8_t pick(const RankInfo& a, const RankInfo& b, const Offer& oa, const Offer& ob, int ra, int rb) {
  bool forced = oa.wanted == kUcx || oa.wanted == kIbverbs || ob.wanted == kUcx || ob.wanted == kIbverbs;
  if (forced) {
    if (oa.wanted != ob.wanted)
      throw InvalidArgument(std::string("STRATA_TRANSPORT is ") + kind_name(oa.wanted) + " on rank " + std::to_string(ra) +
                            " but " + kind_name(ob.wanted) + " on rank " + std::to_string(rb) +
                            "; set the same value on every rank");
    return oa.wanted;
  }
  if (use_shm(a, b)) return kShm;
  if (oa.wanted == kTcp || ob.wanted == kTcp) return kTcp;
  if (oa.caps & ob.caps & kCapUcxRdma) return kUcx;
  if (oa.caps & ob.caps & kCapIbDevice) return kIbverbs;
  return kTcp;
}

std::vector<uint8_t> agree_transports(Mesh& m, int rank, const std::vector<RankInfo>& table, const Config& cfg,
                                      net::Deadline deadline) {
  const int n = static_cast<int>(table.size());
  Offer mine{kOfferMagic, 1, wanted_kind(cfg), 0, 0};
  bool remote_peer = false;  // RDMA is only probed when some peer is on another host
  for (int j = 0; j < n; ++j) remote_peer |= j != rank && !use_shm(table[rank], table[j]);
  if (mine.wanted == kAuto && remote_peer) {
    if (kUcxTransport.rdma()) mine.caps |= kCapUcxRdma;
    if (kIbverbsTransport.rdma()) mine.caps |= kCapIbDevice;
  }
  std::vector<uint8_t> kinds(n, kAuto);
  for (int j = 0; j < n; ++j)
    if (j != rank) net::send_all(m.control[j].get(), &mine, sizeof mine, deadline, peer_name(j));
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    Offer theirs{};
    net::recv_all(m.control[j].get(), &theirs, sizeof theirs, deadline, peer_name(j));
    if (theirs.magic != kOfferMagic || theirs.version != 1)
      throw SystemError("unexpected setup message from " + peer_name(j) + " (a different Strata version?)");
    kinds[j] = rank < j ? pick(table[rank], table[j], mine, theirs, rank, j) : pick(table[j], table[rank], theirs, mine, j, rank);
  }
  return kinds;
}

// ucx and ibverbs: every peer gets a length-prefixed blob over its control socket (all
// sends first: the blobs are small enough for the socket buffers), then links are made
// from the blobs received.
void connect_by_blobs(Mesh& m, LinkSetup& setup, int rank, const std::vector<RankInfo>& table, const std::vector<int>& peers,
                      net::Deadline deadline) {
  auto same_host = [&](int j) { return std::strncmp(table[rank].host, table[j].host, sizeof table[j].host) == 0; };
  for (int j : peers) {
    std::vector<char> blob = setup.local_info(j, same_host(j));
    uint32_t len = static_cast<uint32_t>(blob.size());
    net::send_all(m.control[j].get(), &len, sizeof len, deadline, peer_name(j));
    net::send_all(m.control[j].get(), blob.data(), blob.size(), deadline, peer_name(j));
  }
  for (int j : peers) {
    uint32_t len = 0;
    net::recv_all(m.control[j].get(), &len, sizeof len, deadline, peer_name(j));
    if (len == 0 || len > (1u << 20)) throw SystemError("unexpected connection info from " + peer_name(j));
    std::vector<char> blob(len);
    net::recv_all(m.control[j].get(), blob.data(), len, deadline, peer_name(j));
    m.links[j] = setup.connect(j, blob, same_host(j));
  }
  // Nobody goes on (and could finish and tear down its side, e.g. the shared-memory FIFO a
  // UCX endpoint attaches to) before every peer has connected to it.
  exchange_token(m, peers, 'C', deadline);
}

}  // namespace

Mesh connect_mesh(int rank, const std::vector<RankInfo>& table, const net::Fd& listener,
                  const bootstrap::Secret& secret, uint64_t tag, const Config& cfg, net::Deadline deadline) {
  const int n = static_cast<int>(table.size());
  // A forced transport that cannot work here is a clear error before anything connects.
  if (cfg.transport == "ucx") kUcxTransport.require();
  if (cfg.transport == "ibverbs") kIbverbsTransport.require();
  Mesh m;
  m.links.resize(n);
  m.control.resize(n);
  std::vector<std::vector<net::Fd>> data(n);
  for (int j = 0; j < n; ++j) data[j].resize(static_cast<size_t>(j == rank ? 0 : data_sockets(table[rank], table[j])));

  // Higher ranks call lower ones; the listen backlog holds calls until they are accepted.
  // Every rank listens before the table is known, so a refusal means the peer died.
  auto call = [&](int j, net::Role role, int index) {
    net::Fd fd = net::connect_to(table[j].listen, deadline, true);
    net::Hello h = net::make_hello(secret.bytes, tag, rank, n, role, index);
    net::send_all(fd.get(), &h, sizeof h, deadline, peer_name(j));
    return fd;
  };
  for (int j = 0; j < rank; ++j) {
    m.control[j] = call(j, net::Role::control, 0);
    for (size_t i = 0; i < data[j].size(); ++i) data[j][i] = call(j, net::Role::data, static_cast<int>(i));
  }
  size_t expected = 0;
  for (int j = rank + 1; j < n; ++j) expected += 1 + data[j].size();
  // Who has not called yet, for the timeout's message.
  auto awaited = [&] {
    std::vector<int> missing;
    for (int j = rank + 1; j < n; ++j) {
      bool all = m.control[j].valid();
      for (const net::Fd& d : data[j]) all &= d.valid();
      if (!all) missing.push_back(j);
    }
    std::string s;
    for (int j : missing) s += (s.empty() ? "" : ", ") + std::to_string(j);
    return "connections from rank" + std::string(missing.size() == 1 ? " " : "s ") + s + " (of " + std::to_string(n) +
           ") at " + net::local_address(listener.get()).str();
  };
  net::Acceptor acceptor(listener.get(), secret.bytes, tag);
  while (expected > 0) {
    auto [fd, h] = acceptor.next(deadline, awaited());
    int j = h.rank;
    bool ok = j > rank && j < n && h.nranks == n;
    net::Fd* slot = nullptr;
    if (ok && h.role == net::Role::control) slot = &m.control[j];
    if (ok && h.role == net::Role::data && h.index >= 0 && h.index < static_cast<int>(data[j].size())) slot = &data[j][h.index];
    if (!slot || slot->valid()) {
      STRATA_WARN("dropped an unexpected connection (rank %d of %d, role %d)", h.rank, h.nranks, static_cast<int>(h.role));
      continue;
    }
    *slot = std::move(fd);
    --expected;
  }

  std::vector<uint8_t> kinds = agree_transports(m, rank, table, cfg, deadline);
  std::vector<int> ucx_peers, ib_peers;
  for (int j = 0; j < n; ++j) {
    if (kinds[j] == kUcx) ucx_peers.push_back(j);
    if (kinds[j] == kIbverbs) ib_peers.push_back(j);
  }
  // A forced ucx/ibverbs is the same on every rank (agree_transports checked), so no pair
  // uses shared memory then.
  if (wanted_kind(cfg) != kUcx && wanted_kind(cfg) != kIbverbs) connect_shm(m, rank, table, secret, tag, cfg, deadline);
  std::string ucx_desc, ib_desc;
  if (!ucx_peers.empty()) {
    auto setup = kUcxTransport.create(rank, n, cfg);
    connect_by_blobs(m, *setup, rank, table, ucx_peers, deadline);
    ucx_desc = setup->describe();
  }
  if (!ib_peers.empty()) {
    auto setup = kIbverbsTransport.create(rank, n, cfg);
    connect_by_blobs(m, *setup, rank, table, ib_peers, deadline);
    ib_desc = setup->describe();
  }
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    if (!m.links[j]) m.links[j] = std::make_unique<TcpLink>(j, std::move(data[j]), cfg.staging_bytes);
    std::string how = kinds[j] == kUcx        ? ucx_desc
                      : kinds[j] == kIbverbs  ? ib_desc
                      : kinds[j] == kShm      ? std::string("same host")
                                              : std::to_string(data_sockets(table[rank], table[j])) + " sockets, " +
                                                   table[j].listen.str();
    STRATA_INFO("rank %d -> rank %d via %s (%s)", rank, j, m.links[j]->name(), how.c_str());
  }
  return m;
}

}  // namespace strata
