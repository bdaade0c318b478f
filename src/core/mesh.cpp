#include "core/mesh.hpp"

#include <cstring>

#include "ground/log.hpp"
#include "strata/error.hpp"
#include "transports/link_setup.hpp"
#include "transports/transport_table.hpp"

namespace strata {

using bootstrap::RankInfo;

namespace {
bool same_host(const RankInfo& a, const RankInfo& b) { return std::strncmp(a.host, b.host, sizeof a.host) == 0; }
}  // namespace

bool use_shm(const RankInfo& a, const RankInfo& b) { return !a.force_tcp && !b.force_tcp && same_host(a, b); }

namespace {

int data_sockets(const RankInfo& a, const RankInfo& b) {
  return use_shm(a, b) ? 0 : std::min(a.tcp_nsocks, b.tcp_nsocks);
}

std::string peer_name(int r) { return "rank " + std::to_string(r); }

// Everyone in `peers` sends us `token` and we send it to them.
void exchange_token(Mesh& m, const std::vector<int>& peers, char token, net::Deadline deadline) {
  for (int j : peers) net::send_all(m.control[j].get(), &token, 1, deadline, peer_name(j));
  for (int j : peers) {
    char got = 0;
    net::recv_all(m.control[j].get(), &got, 1, deadline, peer_name(j));
    if (got != token) throw SystemError("unexpected setup message from " + peer_name(j));
  }
}

// Every rank sends each peer its offer and chooses, for every memory kind, the row that
// carries it to that peer; both ends of a pair choose alike. By kind, then peer.
using Choices = std::array<std::vector<const TransportRow*>, kNumMemoryKinds>;

Choices agree_transports(Mesh& m, int rank, const std::vector<RankInfo>& table, const Config& cfg,
                         net::Deadline deadline) {
  const int n = static_cast<int>(table.size());
  bool remote_peer = false;  // RDMA is only probed when some peer is on another host
  for (int j = 0; j < n; ++j) remote_peer |= j != rank && !use_shm(table[rank], table[j]);
  const TransportOffer mine = make_offer(cfg, remote_peer);
  Choices chosen;
  for (auto& c : chosen) c.assign(static_cast<size_t>(n), nullptr);
  for (int j = 0; j < n; ++j)
    if (j != rank) net::send_all(m.control[j].get(), &mine, sizeof mine, deadline, peer_name(j));
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    TransportOffer theirs{};
    net::recv_all(m.control[j].get(), &theirs, sizeof theirs, deadline, peer_name(j));
    if (!theirs.valid()) throw SystemError("unexpected setup message from " + peer_name(j) + " (a different Strata version?)");
    const bool same = same_host(table[rank], table[j]);
    for (MemoryKind k : kAllMemoryKinds)
      chosen[static_cast<size_t>(k)][static_cast<size_t>(j)] =
          rank < j ? choose(k, same, mine, theirs, rank, j) : choose(k, same, theirs, mine, j, rank);
  }
  return chosen;
}

// One row's links of one memory kind, to the peers in `ctx` (transports/link_setup.hpp
// says in which order). Returns the setup, whose describe() the INFO lines use.
std::unique_ptr<LinkSetup> connect_row(Mesh& m, const TransportRow& row, const SetupContext& ctx, net::Deadline deadline) {
  std::unique_ptr<LinkSetup> setup = row.transport->create(ctx);
  Links& links = m.of(ctx.memory);
  if (!row.handshake) {
    for (int j : ctx.peers) links[j] = setup->connect(j, {});
    return setup;
  }
  for (int j : ctx.peers) {
    std::vector<char> blob = setup->local_info(j);
    uint32_t len = static_cast<uint32_t>(blob.size());
    net::send_all(m.control[j].get(), &len, sizeof len, deadline, peer_name(j));
    net::send_all(m.control[j].get(), blob.data(), blob.size(), deadline, peer_name(j));
  }
  for (int j : ctx.peers) {
    uint32_t len = 0;
    net::recv_all(m.control[j].get(), &len, sizeof len, deadline, peer_name(j));
    if (len == 0 || len > (1u << 20)) throw SystemError("unexpected connection info from " + peer_name(j));
    std::vector<char> blob(len);
    net::recv_all(m.control[j].get(), blob.data(), len, deadline, peer_name(j));
    links[j] = setup->connect(j, blob);
  }
  exchange_token(m, ctx.peers, 'C', deadline);
  setup->all_connected();
  return setup;
}

}  // namespace

Mesh connect_mesh(int rank, const std::vector<RankInfo>& table, const net::Fd& listener,
                  const bootstrap::Secret& secret, uint64_t tag, const Config& cfg, net::Deadline deadline) {
  const int n = static_cast<int>(table.size());
  // A forced transport that cannot work here is a clear error before anything connects.
  if (const TransportRow* forced = row_named(cfg.transport); forced && forced->transport->require)
    forced->transport->require();
  Mesh m;
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

  const Choices chosen = agree_transports(m, rank, table, cfg, deadline);
  SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = n;
  ctx.cfg = &cfg;
  ctx.secret = secret.bytes;
  ctx.comm_tag = tag;
  ctx.sockets = &data;
  ctx.host_links = &m.of(MemoryKind::host);  // kinds are set up in order: host links first
  for (int j = 0; j < n; ++j) {
    ctx.same_host.push_back(same_host(table[rank], table[j]));
    ctx.address.push_back(table[j].listen.str());
  }
  for (MemoryKind k : kAllMemoryKinds) {
    const auto& row_of = chosen[static_cast<size_t>(k)];
    Links& links = m.of(k);
    links.resize(n);
    std::vector<std::string> how(n);
    ctx.memory = k;
    for (const TransportRow& row : transport_table()) {
      ctx.peers.clear();
      for (int j = 0; j < n; ++j)
        if (row_of[j] == &row) ctx.peers.push_back(j);
      if (ctx.peers.empty()) continue;
      std::unique_ptr<LinkSetup> setup = connect_row(m, row, ctx, deadline);
      for (int j : ctx.peers) {
        if (!links[j]->caps().memory.has(k))
          throw InternalError(std::string("the ") + row.name + " link to " + peer_name(j) + " does not carry " + name(k) +
                              " memory, which its row says it does");
        how[j] = setup->describe(j);
      }
    }
    for (int j = 0; j < n; ++j)
      if (links[j])
        STRATA_INFO("rank %d -> rank %d via %s (%s)%s", rank, j, links[j]->name(), how[j].c_str(),
                    k == MemoryKind::host ? "" : (std::string(" for ") + name(k) + " memory").c_str());
  }
  return m;
}

}  // namespace strata
