// Comm::grow: ranks outside a communicator (newcomers) join it. docs/api.md, "Grow", has the
// contract.
//
// Rank 0 of the communicator opens a door (open_door): a listener whose Acceptor takes only
// connections that present the communicator's secret, with a tag of the door's own, as the
// bootstrap root takes joining ranks. A newcomer (join) connects -- again and again until
// the door opens -- and sends its hello (its key in the rank field) and its description,
// which rank 0 checks as the root checks a joining rank's. newcomers() counts those
// waiting. grow() then all-gathers the existing ranks' descriptions (each with a new
// listener's port, as split does), rank 0 orders them with the newcomers' by key, and
// sends the table and a tag derived from the communicator's to the existing ranks (a
// broadcast) and to each newcomer (over its door connection). Everyone connects a new mesh
// over the table (CommState::create: the settings that shape plans must agree, as at
// bootstrap). The old communicator is left as it was.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <tuple>

#include "core/bootstrap/id_exchange.hpp"
#include "core/bootstrap/unique_id.hpp"
#include "core/comm_state.hpp"
#include "core/door.hpp"
#include "core/bootstrap/launch_env.hpp"
#include "ground/log.hpp"

namespace strata {

namespace {

constexpr uint32_t kGrowMagic = 0x47525753;   // "SWRG"
// How long newcomers() waits at the door for connections already under way, and how long
// rank 0 waits in one round of a grow's wait for its newcomers.
constexpr double kAdmitWait = 0.005, kRoundWait = 0.05;

// What rank 0 tells the existing ranks and each newcomer it takes: the grown
// communicator's size and tag, and the newcomer's rank; a table of `nranks` descriptions
// follows.
struct GrowReply {
  uint32_t magic;
  int32_t nranks;
  int32_t rank;  // a newcomer's rank in the grown communicator
  int32_t pad;
  uint64_t tag;
};

struct Guest {
  net::Fd fd;
  bootstrap::RankInfo info;
  int32_t key;
  std::string from;
};

// A live connection has nothing to read, or data; a closed one reads 0 bytes.
bool still_there(const net::Fd& fd) {
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  char c;
  return ::recv(fd.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

// Existing ranks and newcomers in the grown communicator's order: by key, then the
// existing ranks before the newcomers, then old rank or arrival.
struct Seat {
  int32_t key;
  int32_t newcomer;  // 0: an existing rank
  int32_t index;     // its old rank, or its place among the newcomers taken
  int32_t pad;
};

// The grown communicator over `table`, its hierarchy from the hosts (as a split's). A
// failure to connect (a newcomer that left) says it was the grow's, keeping its kind.
Comm connect_grown(int rank, int nranks, const std::vector<bootstrap::RankInfo>& table, net::Fd listener,
                   const bootstrap::Secret& secret, uint64_t tag, const Config& cfg) {
  try {
    return CommState::create(rank, nranks, table, net::Incoming(std::move(listener)), secret, tag, cfg,
                             hierarchy_of(table, {}));
  } catch (const PeerError& e) {  // TimeoutError too
    const std::string what = std::string("grow: connecting the grown communicator failed: ") + e.what();
    if (e.kind() == ErrorKind::timeout) throw TimeoutError(e.peer(), what);
    throw PeerError(e.peer(), what, e.kind());
  } catch (const SystemError& e) {
    throw SystemError(std::string("grow: connecting the grown communicator failed: ") + e.what());
  }
}

}  // namespace

struct Door {
  net::Fd listener;
  std::unique_ptr<net::Acceptor> acceptor;
  std::string address;
  std::vector<Guest> waiting;  // in the order they arrived

  // Takes in the newcomers that present themselves by `until`, and forgets those that left.
  void admit(net::Deadline until) {
    std::erase_if(waiting, [](const Guest& g) { return !still_there(g.fd); });
    for (;;) {
      try {
        auto [fd, hello] = acceptor->next(until, "newcomers at the door at " + address);
        Guest g{std::move(fd), {}, hello.rank, ""};
        const std::string who = "a newcomer (key " + std::to_string(hello.rank) + ")";
        net::recv_all(g.fd.get(), &g.info, sizeof g.info, net::deadline_after(2), who);
        bootstrap::check_rank_info(g.info, who);
        g.from = g.info.listen.str();
        waiting.push_back(std::move(g));
      } catch (const TimeoutError&) {
        return;
      } catch (const Error& e) {
        STRATA_WARN("door: dropped a newcomer: %s", e.what());
      }
    }
  }
};

UniqueId Comm::open_door(const std::string& address) {
  CommState& s = checked();
  if (s.group_depth > 0) throw InvalidUsage("open_door: not allowed inside group_start/group_end");
  UniqueId id{};
  std::string problem;
  if (s.rank == 0 && !s.door) {
    try {
      auto door = std::make_shared<Door>();
      net::SockAddr at = address.empty() ? net::interface_address(settings::text("STRATA_SOCKET_IFNAME"))
                                         : net::parse_host_port(address);
      door->listener = net::listen_on(at);
      at.set_port(net::local_address(door->listener.get()).port());
      door->address = at.str();
      door->acceptor = std::make_unique<net::Acceptor>(door->listener.get(), s.secret.bytes, kDoorTag);
      id = bootstrap::encode_id({at, s.secret});
      s.door = door;
      STRATA_INFO("door for newcomers open at %s", door->address.c_str());
    } catch (const Error& e) {
      problem = e.what();
    }
  } else if (s.rank == 0) {
    id = bootstrap::encode_id({net::parse_host_port(s.door->address), s.secret});
  }
  // Every rank learns the id, or why rank 0 has none (a broadcast of id, then of the reason).
  char why[240] = {};
  std::snprintf(why, sizeof why, "%s", problem.c_str());
  s.start(describe(Collective::broadcast, why, why, sizeof why, DataType::uint8, ReduceOp::sum, 0, s.rank, s.nranks), true);
  if (why[0]) throw SystemError("open_door: rank 0 could not listen at " + (address.empty() ? "its interface" : address) + ": " + why);
  s.start(describe(Collective::broadcast, &id, &id, sizeof id, DataType::uint8, ReduceOp::sum, 0, s.rank, s.nranks), true);
  return id;
}

int Comm::newcomers() {
  CommState& s = checked();
  if (s.group_depth > 0) throw InvalidUsage("newcomers: not allowed inside group_start/group_end");
  int32_t n = -1;  // no door
  if (s.rank == 0 && s.door) {
    s.door->admit(net::deadline_after(kAdmitWait));
    n = static_cast<int32_t>(s.door->waiting.size());
  }
  s.start(describe(Collective::broadcast, &n, &n, 1, DataType::int32, ReduceOp::sum, 0, s.rank, s.nranks), true);
  if (n < 0) throw InvalidUsage("newcomers: no door is open on this communicator (open_door first)");
  return n;
}

Comm Comm::grow(int count, int key) {
  CommState& s = checked();
  if (s.group_depth > 0) throw InvalidUsage("grow: not allowed inside group_start/group_end");
  if (count < 1) throw InvalidArgument("grow: count must be at least 1 newcomer, got " + std::to_string(count));
  // Calls on this communicator from other threads are refused meanwhile (Comm::start).
  struct Growing {
    std::atomic<bool>& flag;
    explicit Growing(std::atomic<bool>& f) : flag(f) { flag.store(true); }
    ~Growing() { flag.store(false); }
  } growing(s.growing);

  // Every existing rank's key and description, with a new listener's port.
  struct Entry {
    int32_t key, pad;
    bootstrap::RankInfo info;
  };
  net::Fd listener = listen_like(s.table[s.rank].listen);
  Entry mine{key, 0, s.table[s.rank]};
  mine.info.listen.set_port(net::local_address(listener.get()).port());
  std::vector<Entry> all(static_cast<size_t>(s.nranks));
  s.start(describe(Collective::all_gather, &mine, all.data(), sizeof(Entry), DataType::uint8, ReduceOp::sum, 0, s.rank,
                   s.nranks),
          true);
  for (int r = 0; r < s.nranks; ++r) bootstrap::check_rank_info(all[r].info, "rank " + std::to_string(r) + " (grow)");

  // Rank 0 waits for the newcomers, in rounds that every rank follows (a broadcast each, so
  // no rank sits in one call long enough to take rank 0 for stuck), then seats everyone.
  GrowReply head{kGrowMagic, 0, -1, 0, 0};
  std::vector<Seat> seats;
  std::vector<Guest> taken;
  const net::Deadline until = net::deadline_after(s.cfg.timeout_s);
  for (;;) {
    int32_t round[2] = {0, 0};  // newcomers waiting; 1: enough, -1: gave up, -2: no door
    if (s.rank == 0) {
      if (s.door) {
        s.door->admit(std::min(until, net::deadline_after(kRoundWait)));
        round[0] = static_cast<int32_t>(s.door->waiting.size());
        round[1] = round[0] >= count ? 1 : net::Clock::now() >= until ? -1 : 0;
      } else {
        round[1] = -2;
      }
    }
    s.start(describe(Collective::broadcast, round, round, 2, DataType::int32, ReduceOp::sum, 0, s.rank, s.nranks), true);
    if (round[1] == 0) continue;
    if (round[1] == -2) throw InvalidUsage("grow: no door is open on this communicator (open_door first)");
    if (round[1] == -1) {
      const std::string refused = s.rank == 0 ? s.door->acceptor->refusals() : "";
      throw TimeoutError(-1, "grow: " + std::to_string(round[0]) + " of " + std::to_string(count) +
                                 " newcomers came to the door" + (s.rank == 0 ? " at " + s.door->address : "") +
                                 " within STRATA_TIMEOUT (" + std::to_string(s.cfg.timeout_s) + " s)" +
                                 (refused.empty() ? "" : "; " + refused) + "; this communicator is unchanged");
    }
    break;
  }
  if (s.rank == 0) {
    taken.assign(std::make_move_iterator(s.door->waiting.begin()),
                 std::make_move_iterator(s.door->waiting.begin() + count));
    s.door->waiting.erase(s.door->waiting.begin(), s.door->waiting.begin() + count);
    for (int r = 0; r < s.nranks; ++r) seats.push_back({all[r].key, 0, r, 0});
    for (int g = 0; g < count; ++g) seats.push_back({taken[g].key, 1, g, 0});
    std::stable_sort(seats.begin(), seats.end(), [](const Seat& a, const Seat& b) {
      return std::tie(a.key, a.newcomer, a.index) < std::tie(b.key, b.newcomer, b.index);
    });
    head.nranks = static_cast<int32_t>(seats.size());
    head.tag = mix(s.tag ^ mix(0x67726f77ull + ++s.grows));
  }
  s.start(describe(Collective::broadcast, &head, &head, sizeof head, DataType::uint8, ReduceOp::sum, 0, s.rank, s.nranks),
          true);
  seats.resize(static_cast<size_t>(head.nranks));
  s.start(describe(Collective::broadcast, seats.data(), seats.data(), seats.size() * sizeof(Seat), DataType::uint8,
                   ReduceOp::sum, 0, s.rank, s.nranks),
          true);
  std::vector<bootstrap::RankInfo> table;
  int new_rank = -1;
  for (const Seat& seat : seats) {
    if (!seat.newcomer && seat.index == s.rank) new_rank = static_cast<int>(table.size());
    table.push_back(seat.newcomer ? bootstrap::RankInfo{} : all[static_cast<size_t>(seat.index)].info);
  }
  // The newcomers' descriptions reach the existing ranks from rank 0.
  std::vector<bootstrap::RankInfo> guests(static_cast<size_t>(count));
  if (s.rank == 0)
    for (int g = 0; g < count; ++g) guests[static_cast<size_t>(g)] = taken[static_cast<size_t>(g)].info;
  s.start(describe(Collective::broadcast, guests.data(), guests.data(), guests.size() * sizeof(bootstrap::RankInfo),
                   DataType::uint8, ReduceOp::sum, 0, s.rank, s.nranks),
          true);
  for (size_t i = 0; i < seats.size(); ++i)
    if (seats[i].newcomer) {
      if (seats[i].index < 0 || seats[i].index >= count) throw InternalError("grow: a seat names no newcomer");
      table[i] = guests[static_cast<size_t>(seats[i].index)];
    }
  // Each newcomer gets the same table and its rank.
  if (s.rank == 0) {
    for (size_t i = 0; i < seats.size(); ++i) {
      if (!seats[i].newcomer) continue;
      Guest& g = taken[static_cast<size_t>(seats[i].index)];
      GrowReply mine_reply = head;
      mine_reply.rank = static_cast<int32_t>(i);
      const net::Deadline d = net::deadline_after(s.cfg.timeout_s);
      try {
        net::send_all(g.fd.get(), &mine_reply, sizeof mine_reply, d, "newcomer at " + g.from);
        net::send_all(g.fd.get(), table.data(), table.size() * sizeof(bootstrap::RankInfo), d, "newcomer at " + g.from);
      } catch (const Error& e) {
        // It left: connecting the mesh fails on every rank, naming it.
        STRATA_WARN("grow: newcomer at %s left before it got the table: %s", g.from.c_str(), e.what());
      }
    }
  }
  STRATA_INFO("grow: rank %d of %d is rank %d of %d", s.rank, s.nranks, new_rank, head.nranks);
  return connect_grown(new_rank, head.nranks, table, std::move(listener), s.secret, head.tag, s.cfg);
}

Comm Comm::join(const UniqueId& id, int key, const CommOptions& options) {
  const bootstrap::IdFields f = bootstrap::decode_id(id);
  if (!(options.timeout_s >= 0) || !std::isfinite(options.timeout_s))
    throw InvalidArgument("CommOptions::timeout_s must be a finite number of seconds >= 0 (0: STRATA_TIMEOUT), got " +
                          std::to_string(options.timeout_s));
  Config cfg = Config::from_env();
  if (options.timeout_s > 0) {
    cfg.timeout_s = options.timeout_s;
    cfg.timeout_from = "CommOptions::timeout_s";
  }
  const net::Deadline deadline = net::deadline_after(cfg.timeout_s);
  const std::string what = "the door at " + f.root.str();
  net::Fd listener = listen_like(f.root);
  bootstrap::RankInfo mine = my_info(cfg, listener, -1);
  net::Fd fd = net::connect_to(f.root, deadline);
  // Peers reach this rank at the address it reaches the door from.
  const uint16_t port = mine.listen.port();
  mine.listen = net::local_address(fd.get());
  mine.listen.set_port(port);
  const net::Hello h = net::make_hello(f.secret.bytes, kDoorTag, key, 0, net::Role::join, 0);
  net::send_all(fd.get(), &h, sizeof h, deadline, what);
  net::send_all(fd.get(), &mine, sizeof mine, deadline, what);
  GrowReply head{};
  try {
    net::recv_all(fd.get(), &head, sizeof head, deadline, what);
  } catch (const TimeoutError&) {
    throw TimeoutError(-1, "join: no grow took this newcomer in within " + std::to_string(cfg.timeout_s) + " s (" +
                               cfg.timeout_from + ") at " + what);
  } catch (const Error& e) {
    throw SystemError("join: " + what + " closed the connection (a wrong secret is refused so; or its communicator "
                      "went away): " + e.what());
  }
  if (head.magic != kGrowMagic || head.nranks < 2 || head.rank < 0 || head.rank >= head.nranks)
    throw SystemError("join: " + what + " answered with something else (a different Strata version?)");
  std::vector<char> bytes(static_cast<size_t>(head.nranks) * sizeof(bootstrap::RankInfo));
  net::recv_all(fd.get(), bytes.data(), bytes.size(), deadline, what);
  const std::vector<bootstrap::RankInfo> table = bootstrap::decode_rank_table(bytes.data(), bytes.size(), head.nranks, what);
  log::set_thread_rank(head.rank);
  STRATA_INFO("join: rank %d of %d through %s", head.rank, head.nranks, what.c_str());
  return connect_grown(head.rank, head.nranks, table, std::move(listener), f.secret, head.tag, cfg);
}

Comm Comm::join_from_env(int key) {
  auto found = bootstrap::find_launch(bootstrap::process_env(), bootstrap::pmix_built());
  if (!found || found->rendezvous != bootstrap::Rendezvous::address)
    throw InvalidArgument("join_from_env: the job's rendezvous is not an address (STRATA_ROOT, torchrun's "
                          "MASTER_ADDR, Slurm's first node): a newcomer finds the door there; use join() with the "
                          "id open_door() returned instead");
  return join(rendezvous_id(*found), key);
}

}  // namespace strata
