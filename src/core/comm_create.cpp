// Making communicators: the unique id and bootstrap, connecting the mesh, split.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "algorithms/connections.hpp"
#include "core/bootstrap/id_exchange.hpp"
#include "core/bootstrap/launch_env.hpp"
#include "core/comm_state.hpp"
#include "core/placement.hpp"
#include "transports/ibverbs/ib_hca.hpp"
#include "transports/staging/staging_link.hpp"
#include "transports/transport_table.hpp"
#include "ground/fnv1a.hpp"
#include "ground/log.hpp"
#include "ground/ranks_text.hpp"

namespace strata {

net::Fd listen_like(const net::SockAddr& advertised) {
  net::SockAddr any;
  any.ss.ss_family = advertised.ss.ss_family;
  any.len = advertised.ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return net::listen_on(any);
}

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<std::string> hosts_of(const std::vector<bootstrap::RankInfo>& table) {
  std::vector<std::string> hosts;
  for (const auto& info : table) hosts.emplace_back(info.host);
  return hosts;
}

Hierarchy hierarchy_of(const std::vector<bootstrap::RankInfo>& table, const std::vector<LevelSpec>& spec) {
  const bool tcp = std::any_of(table.begin(), table.end(), [](const bootstrap::RankInfo& i) { return i.force_tcp != 0; });
  return build_hierarchy(hosts_of(table), spec, settings::text("STRATA_LINK_MODEL"), tcp);
}

namespace {

std::vector<RankCpus> rank_cpus(const std::vector<bootstrap::RankInfo>& table) {
  std::vector<RankCpus> cpus;
  for (const auto& info : table) cpus.push_back({info.machine, std::vector<uint64_t>(std::begin(info.cpus), std::end(info.cpus))});
  return cpus;
}

// The settings every rank must share because plans are built from them (a rank with
// another algorithm or chunk pairs its transfers with the wrong bytes), as one hash.
uint64_t plan_settings_hash(const Config& cfg) {
  const std::string all = cfg.algo + "|" + (cfg.chunk_bytes_set ? std::to_string(cfg.chunk_bytes) : "") + "|" +
                          settings::text("STRATA_HIERARCHY") + "|" + settings::text("STRATA_LINK_MODEL");
  return fnv1a(all.data(), all.size());
}

// Every rank compares the table it received, so every rank refuses alike.
void check_settings_agree(const std::vector<bootstrap::RankInfo>& table) {
  auto ranks_where = [&](auto differs) {
    std::vector<int> odd;
    for (size_t r = 0; r < table.size(); ++r)
      if (differs(table[r])) odd.push_back(static_cast<int>(r));
    return odd;
  };
  const auto& first = table.front();
  std::vector<int> odd = ranks_where([&](const bootstrap::RankInfo& i) { return i.check != first.check; });
  if (!odd.empty())
    throw InvalidArgument("STRATA_CHECK differs between ranks: rank 0 has " + std::to_string(first.check) + ", " +
                          ranks_text(odd) + " the other value; set the same on every rank");
  // A transport every rank must force alike: compared here, where every rank has the
  // table, so every rank refuses at creation (pairs connect on need, and would find the
  // difference one pair at a time).
  odd = ranks_where([&](const bootstrap::RankInfo& i) { return i.transport != first.transport; });
  if (!odd.empty()) {
    auto named = [](int32_t id) -> std::string {
      for (const TransportRow& row : transport_table())
        if (row.id == id) return row.name;
      return "auto";
    };
    throw InvalidArgument("STRATA_TRANSPORT is " + named(first.transport) + " on rank 0 but " +
                          named(table[static_cast<size_t>(odd.front())].transport) + " on " + ranks_text(odd) +
                          "; set the same value on every rank");
  }
  odd = ranks_where([&](const bootstrap::RankInfo& i) { return i.link_settings != first.link_settings; });
  if (!odd.empty())
    throw InvalidArgument("STRATA_UCX_PUT_CHUNK_BYTES or STRATA_UCX_STAGING_CHUNKS differ between rank 0 and " +
                          ranks_text(odd) + " (the put slots of a UCX link); set the same STRATA_UCX_PUT_CHUNK_BYTES "
                          "and STRATA_UCX_STAGING_CHUNKS on every rank");
  odd = ranks_where([&](const bootstrap::RankInfo& i) { return i.plan_settings != first.plan_settings; });
  if (!odd.empty())
    throw InvalidArgument("the settings that shape plans (STRATA_ALGO, STRATA_CHUNK_BYTES, STRATA_HIERARCHY, "
                          "STRATA_LINK_MODEL) differ between rank 0 and " + ranks_text(odd) + "; set the same on every rank");
}

// A communicator's settings, every one checked before this rank joins (the root then
// names it as missing): Config::from_env parses each by its declared type and choices;
// the text settings with a grammar of their own are parsed here by their readers, also
// where this path does not use them (a secret under a unique id, an HCA list without
// ibverbs), so a malformed value never passes unnoticed.
Config creation_config() {
  Config cfg = Config::from_env();
  if (!cfg.algo.empty()) {  // one of algorithms/select.cpp's names (the one list), spelt as there
    std::string names;
    for (Algo a : kAllAlgos) names += std::string(names.empty() ? "" : "|") + name(a);
    cfg.algo = settings::choose("STRATA_ALGO", cfg.algo, names);
  }
  (void)parse_hierarchy_spec(settings::text("STRATA_HIERARCHY"));
  (void)build_hierarchy({"a"}, {}, settings::text("STRATA_LINK_MODEL"));
  if (auto hex = settings::raw("STRATA_SECRET")) (void)bootstrap::parse_secret_hex(*hex);
  if (auto hca = settings::raw("STRATA_IB_HCA")) (void)ibverbs::parse_hca_list(*hca);
  if (auto ifname = settings::raw("STRATA_SOCKET_IFNAME")) (void)net::interface_address(*ifname);
  (void)staging_chunk_bytes();
  return cfg;
}

}  // namespace

Hierarchy tuner_view(const std::vector<bootstrap::RankInfo>& table, Hierarchy h) {
  h.oversubscribed = oversubscribed(rank_cpus(table));
  return h;
}

// An emulated node's ranks get a host identity of their own, so they talk over tcp as
// separate hosts would.
bootstrap::RankInfo my_info(const Config& cfg, const net::Fd& listener, int emulated_node) {
  bootstrap::RankInfo info{};
  info.listen = net::local_address(listener.get());
  std::string host = bootstrap::host_identity();
  if (emulated_node >= 0) host += "/emulated-node-" + std::to_string(emulated_node);
  std::snprintf(info.host, sizeof info.host, "%s", host.c_str());
  info.tcp_nsocks = cfg.tcp_nsocks;
  info.force_tcp = cfg.transport == "tcp";
  info.check = cfg.check;
  if (const TransportRow* forced = row_named(cfg.transport); forced && forced->forcing == Forcing::every_rank)
    info.transport = forced->id;
  info.plan_settings = plan_settings_hash(cfg);
  const std::string links = std::to_string(settings::integer("STRATA_UCX_PUT_CHUNK_BYTES")) + "|" +
                            std::to_string(settings::integer("STRATA_UCX_STAGING_CHUNKS"));
  info.link_settings = fnv1a(links.data(), links.size());
  std::snprintf(info.machine, sizeof info.machine, "%s", bootstrap::machine_identity().c_str());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) CPU_SET(0, &set);  // unknown: count one CPU
  for (int c = 0; c < CPU_SETSIZE && c < 64 * 16; ++c)
    if (CPU_ISSET(c, &set)) info.cpus[c / 64] |= uint64_t{1} << (c % 64);
  return info;
}

std::shared_ptr<CommState> CommState::make(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table,
                                           net::Incoming in, const bootstrap::Secret& secret,
                                           uint64_t tag, const Config& cfg, Hierarchy hier) {
  check_settings_agree(table);
  auto s = std::make_shared<CommState>();
  s->hier = tuner_view(table, std::move(hier));
  if (rank == 0) STRATA_INFO("hierarchy: %s%s", s->hier.describe().c_str(),
                             s->hier.oversubscribed ? "; more ranks than CPUs on a machine (the tuner avoids pipelined chains; idle ranks yield at once)" : "");
  s->rank = rank;
  s->nranks = nranks;
  s->cfg = cfg;
  s->secret = secret;
  s->tag = tag;
  s->table = table;
  s->sent_to.assign(static_cast<size_t>(nranks), 0);
  s->received_from.assign(static_cast<size_t>(nranks), 0);
  s->engine = std::make_unique<Engine>(rank, s->table, std::move(in), secret, tag, s->cfg,
                                       s->hier.oversubscribed);
  s->device_calls = std::make_unique<DeviceCalls>(rank, cfg.timeout_s);
  return s;
}

void CommState::connect_overlay() {
  if (nranks == 1) return;
  engine->connect_control(overlay_peers(rank, nranks));
}

Comm CommState::create(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table, net::Incoming in,
                       const bootstrap::Secret& secret, uint64_t tag, const Config& cfg, Hierarchy hier) {
  auto s = make(rank, nranks, table, std::move(in), secret, tag, cfg, std::move(hier));
  s->connect_overlay();
  return Comm(s);
}

// ---- creation ----

UniqueId get_unique_id() {
  Config cfg = Config::from_env();
  bootstrap::IdFields f;
  f.root = net::interface_address(settings::text("STRATA_SOCKET_IFNAME"));
  net::Fd listener = net::listen_on(f.root);
  f.root.set_port(net::local_address(listener.get()).port());
  f.secret = bootstrap::random_secret();
  bootstrap::start_root(std::move(listener), f.secret, cfg.timeout_s);
  STRATA_INFO("bootstrap root listening on %s", f.root.str().c_str());
  return bootstrap::encode_id(f);
}

static Comm init(int nranks, int rank, const net::SockAddr& root, const bootstrap::Secret& secret,
                 const CommOptions& options = {}) {
  if (nranks < 1) throw InvalidArgument("nranks must be at least 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    throw InvalidArgument("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  if (!(options.timeout_s >= 0) || !std::isfinite(options.timeout_s))
    throw InvalidArgument("CommOptions::timeout_s must be a finite number of seconds >= 0 (0: STRATA_TIMEOUT), got " +
                          std::to_string(options.timeout_s));
  log::set_thread_rank(rank);
  Config cfg = creation_config();
  if (options.timeout_s > 0) {
    cfg.timeout_s = options.timeout_s;
    cfg.timeout_from = "CommOptions::timeout_s";
  }
  auto spec = parse_hierarchy_spec(settings::text("STRATA_HIERARCHY"));
  net::Incoming in(listen_like(root));
  const std::vector<bootstrap::RankInfo> table = bootstrap::join(
      root, secret, rank, nranks, my_info(cfg, in.listener, emulated_node(spec, rank)), in, net::deadline_after(cfg.timeout_s));
  Comm c = CommState::create(rank, nranks, table, std::move(in), secret, bootstrap::kWorldTag, cfg,
                             hierarchy_of(table, spec));
  // A job's communicators, not split or shrunk ones: their ranks' places would collide.
  move_to_cpu(own_cpu(rank, rank_cpus(table)));
  STRATA_INFO("communicator ready: rank %d of %d, host %s, timeout %g s (%s)", rank, nranks, table[rank].host,
              cfg.timeout_s, cfg.timeout_from);
  return c;
}

Comm Comm::init_rank(int nranks, const UniqueId& id, int rank) { return init_rank(nranks, id, rank, {}); }

Comm Comm::init_rank(int nranks, const UniqueId& id, int rank, const CommOptions& options) {
  bootstrap::IdFields f = bootstrap::decode_id(id);
  return init(nranks, rank, f.root, f.secret, options);
}

LaunchInfo launch_info() {
  auto l = bootstrap::find_launch(bootstrap::process_env(), bootstrap::pmix_built());
  if (!l) return {};
  return {l->launcher, l->rank, l->size > 0 ? l->size : bootstrap::pmix_job_size(), l->local_rank, l->local_size,
          l->rendezvous == bootstrap::Rendezvous::address ? l->root : ""};
}

bootstrap::IdFields root_of(const bootstrap::Launch& l) {
  bootstrap::IdFields f;
  try {
    f.root = net::parse_host_port(l.root);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string(e.what()) + " (rank 0's address, from " + l.root_from + ")");
  }
  f.secret = {};
  if (auto hex = settings::raw("STRATA_SECRET")) {
    f.secret = bootstrap::parse_secret_hex(*hex);
  } else if (l.derived) {
    STRATA_WARN("STRATA_SECRET is not set: the job's secret is derived from its job id alone, which anyone who knows "
                "the id can derive too");
  } else {
    STRATA_WARN("STRATA_SECRET is not set: connections are checked against an all-zero secret");
  }
  if (l.derived) f.secret = bootstrap::derive_secret(f.secret, l.job_id);
  return f;
}

UniqueId rendezvous_id(const bootstrap::Launch& l) { return bootstrap::encode_id(root_of(l)); }

namespace {

// The root of a job whose ranks all know its address: STRATA_ROOT, or derived from the
// launcher's variables (then the secret is derived from the job id too).
Comm init_at_address(const bootstrap::Launch& l, double timeout_s) {
  const bootstrap::IdFields f = root_of(l);
  if (l.rank == 0) {
    net::Fd listener;
    try {
      listener = net::listen_on(f.root);
    } catch (const Error& e) {
      throw SystemError(std::string(e.what()) + " (rank 0 listens at " + l.root + ", from " + l.root_from +
                        (l.derived ? "; STRATA_ROOT_PORT chooses another port" : "") + ")");
    }
    bootstrap::start_root(std::move(listener), f.secret, timeout_s);
  }
  return init(l.size, l.rank, f.root, f.secret);
}

// Rank 0 makes a unique id and passes it through a file or PMIx.
Comm init_by_shared_id(const bootstrap::Launch& l, double timeout_s) {
  bootstrap::MakeId make = [] { return get_unique_id(); };
  bool file = l.rendezvous == bootstrap::Rendezvous::file;
  UniqueId id = file ? bootstrap::share_id_by_file(l.root, l.job_id, l.rank, make, net::deadline_after(timeout_s))
                     : bootstrap::share_id_by_pmix(l.rank, make, timeout_s);
  Comm c = Comm::init_rank(l.size, id, l.rank);
  if (file && l.rank == 0) ::unlink(l.root.c_str());  // every rank has joined, so has read it
  return c;
}

}  // namespace

Comm Comm::init_from_env() {
  auto found = bootstrap::find_launch(bootstrap::process_env(), bootstrap::pmix_built());
  if (!found)
    throw InvalidArgument(
        "init_from_env: no launcher's variables are set (STRATA_RANK, torchrun's RANK, mpirun's "
        "OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID or PMIX_RANK); start it with strata-run, torchrun, mpirun or "
        "srun, or use init_rank");
  bootstrap::Launch& l = *found;
  if (l.size == 0) l.size = bootstrap::pmix_job_size();
  log::set_thread_rank(l.rank);
  STRATA_INFO("%s", l.describe().c_str());
  double timeout_s = creation_config().timeout_s;
  return l.rendezvous == bootstrap::Rendezvous::address ? init_at_address(l, timeout_s)
                                                        : init_by_shared_id(l, timeout_s);
}

Comm Comm::split(int color, int key) {
  CommState& s = checked();
  if (s.group_depth > 0)
    s.refuse(Fault::in_group, Collective::all_gather, "split: not allowed inside group_start/group_end", true);
  struct Entry {
    int32_t color, key;
    bootstrap::RankInfo info;
  };
  net::Fd listener = listen_like(s.table[s.rank].listen);
  Entry mine{color, key, s.table[s.rank]};
  mine.info.listen = s.table[s.rank].listen;  // same address as in the parent, new port
  mine.info.listen.set_port(net::local_address(listener.get()).port());
  std::vector<Entry> all(static_cast<size_t>(s.nranks));
  s.start(describe(Collective::all_gather, &mine, all.data(), sizeof(Entry), DataType::uint8, ReduceOp::sum, 0, s.rank,
                   s.nranks),
          true);
  uint64_t tag = mix(s.tag ^ mix(++s.splits) ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(color))));
  // Checked on the colours every rank received, so every rank refuses the same split.
  std::string bad;
  for (int r = 0; r < s.nranks; ++r)
    if (all[r].color < kSplitNoColor)
      bad += (bad.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " passed " + std::to_string(all[r].color);
  if (!bad.empty())
    throw InvalidArgument("split: a color must be >= 0, or kSplitNoColor (-1, C: STRATA_SPLIT_NOCOLOR) to take no "
                          "part; " + bad + " (every rank refuses this split; the communicator stays usable)");
  // Every rank checks every entry, so a malformed one fails the split on all ranks alike.
  for (int r = 0; r < s.nranks; ++r) bootstrap::check_rank_info(all[r].info, "rank " + std::to_string(r) + " (split)");
  if (color == kSplitNoColor) return Comm();
  std::vector<int> members;
  for (int r = 0; r < s.nranks; ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  std::vector<bootstrap::RankInfo> table;
  int new_rank = -1;
  for (int r : members) {
    if (r == s.rank) new_rank = static_cast<int>(table.size());
    table.push_back(all[r].info);
  }
  STRATA_INFO("split: color %d key %d -> rank %d of %zu", color, key, new_rank, table.size());
  // Nodes come from host identities (emulated nodes included); STRATA_HIERARCHY's upper
  // levels describe the world's ranks, not a subset's.
  return CommState::create(new_rank, static_cast<int>(table.size()), table, net::Incoming(std::move(listener)), s.secret, tag, s.cfg,
                           hierarchy_of(table, {}));
}

}  // namespace strata
