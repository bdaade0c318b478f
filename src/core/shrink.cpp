// Comm::shrink: after a failure, the survivors agree on who is alive over the parent's
// control sockets (core/shrink_agreement.hpp) and connect a new communicator of the
// members, numbered in their old order, with the parent's hierarchy restricted to them and
// a plan cache of its own (so the tuner chooses again for the new shape). docs/api.md,
// "Shrink", has the contract.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "core/comm_state.hpp"
#include "core/shrink_agreement.hpp"
#include "ground/log.hpp"
#include "ground/ranks_text.hpp"

namespace strata {

namespace {

using Time = ShrinkAgreement::Time;

Time now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Sends what the agreement asks to; a notice to a rank not connected yet goes out once it
// is (the agreement talks to every rank, which plans never needed to connect).
void flush(ControlChannel& control, ShrinkAgreement& a) {
  for (const ShrinkAgreement::Out& o : a.take_outgoing()) control.post(o.to, o.n);
}

// What the parent's control sockets bring, fed to the agreement.
struct Feed final : ControlChannel::Reader {
  explicit Feed(ShrinkAgreement& agreement) : a(agreement) {}
  void notice(int from, const Notice& n) override { a.notice(from, n, now_s()); }
  void closed(int from) override {
    if (!a.is_closed(from)) a.closed(from, now_s());
  }
  ShrinkAgreement& a;
};

// Waits up to `wait_ms` (less when the agreement has a deadline sooner) for the parent's
// control sockets, feeds the agreement every notice and closed connection (a rank whose
// listener refuses counts as closed), and sends its answers. Connections to the ranks this
// rank was not connected to are made meanwhile (Comm::shrink asked for all of them).
void pump(Engine& engine, int n, ShrinkAgreement& a, int wait_ms) {
  flush(engine.control(), a);
  const Time left = a.next_deadline() - now_s();
  const int ms = std::clamp(static_cast<int>(left * 1000) + 1, 0, wait_ms);
  Feed feed(a);
  try {
    engine.control().read(feed, ms);
  } catch (const PeerError& e) {  // a rank that went away while connecting
    if (e.peer() >= 0) feed.closed(e.peer());
  }
  for (int j = 0; j < n; ++j)
    if (engine.connector().failed(j)) feed.closed(j);
  a.tick(now_s());
  flush(engine.control(), a);
}

uint16_t port_of(const net::Fd& listener) { return net::local_address(listener.get()).port(); }

}  // namespace

Comm CommState::shrink() {
  const Time t0 = now_s();
  // As NCCL_SHRINK_ABORT: the parent's running and queued operations fail first, so this
  // thread alone reads the control sockets from here on.
  engine->control().revoke();
  queue.abort(std::make_exception_ptr(InvalidUsage("Comm::shrink was called before this operation ran")));
  engine->control().fail_later_calls(std::make_exception_ptr(
      InvalidUsage("this communicator was shrunk: use the communicator Comm::shrink returned, and destroy this one")));

  ShrinkAgreement a(rank, nranks, cfg.timeout_s);
  // The agreement talks to every rank: connect them all (control connections only), a rank
  // that cannot be reached counting as closed.
  for (int j = 0; j < nranks; ++j) engine->connector().want_control(j);
  net::Fd listener = listen_like(table[rank].listen);
  std::vector<int> known_dead;
  if (engine->control().culprit_stopped()) known_dead.push_back(engine->control().culprit());
  a.begin(now_s(), port_of(listener), engine->control().culprit(), known_dead);
  for (;;) {
    while (a.state() == ShrinkAgreement::State::agreeing) pump(*engine, nranks, a, 50);
    flush(engine->control(), a);
    if (a.state() == ShrinkAgreement::State::excluded)
      throw PeerError(a.excluded_by(), "Comm::shrink: " + a.why_excluded());
    if (!a.doomed()) {
      try {
        Comm c = connect_decided(a, std::move(listener));
        STRATA_INFO("shrink: rank %d of %d is rank %d of %zu (left out: %s) after %.3f s, attempt %d", rank, nranks,
                    c.rank(), a.members().size(), ranks_text(a.left_out()).c_str(), now_s() - t0, a.epoch() + 1);
        return c;
      } catch (const Error& e) {
        STRATA_WARN("shrink: attempt %d could not connect the new communicator of %s: %s", a.epoch() + 1,
                    ranks_text(a.members()).c_str(), e.what());
      }
    }
    // The others may have left this rank out meanwhile (a 'D' naming it, read while
    // connecting): then it is out, not the start of another attempt on its own.
    if (a.state() == ShrinkAgreement::State::excluded)
      throw PeerError(a.excluded_by(), "Comm::shrink: " + a.why_excluded());
    listener = listen_like(table[rank].listen);
    a.retry(now_s(), port_of(listener));
  }
}

// Connects the members of the agreement's decision. Meanwhile a second thread keeps
// reading the parent's control sockets: should a member die or begin the next attempt, the
// new communicator is aborted, so that waiting for that member ends now rather than at
// STRATA_TIMEOUT.
Comm CommState::connect_decided(ShrinkAgreement& a, net::Fd listener) {
  const std::vector<int>& members = a.members();
  std::vector<bootstrap::RankInfo> new_table;
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank) new_rank = static_cast<int>(i);
    bootstrap::RankInfo info = table[members[i]];
    info.listen.set_port(a.member_ports()[i]);
    new_table.push_back(info);
  }
  // Every member computes the same tag only from the same decision: members of different
  // decisions refuse each other's connections.
  uint64_t tag = mix(this->tag ^ mix(0x736872696e6bull + static_cast<uint64_t>(a.epoch())));
  for (int x : a.left_out()) tag = mix(tag ^ static_cast<uint64_t>(x));

  std::shared_ptr<CommState> made = make(new_rank, static_cast<int>(members.size()), new_table, net::Incoming(std::move(listener)),
                                         secret, tag, cfg, restrict_hierarchy(hier, members));
  // This rank's side connected is not the communicator whole: the watcher tells the
  // members so and waits until every one has (ShrinkAgreement::all_created).
  std::atomic<bool> connected{false}, done{false};
  const Time commit_by_slack = cfg.timeout_s + 1.0;
  std::thread watcher([&] {
    Time commit_by = ShrinkAgreement::kNever;
    while (!done.load()) {
      pump(*engine, nranks, a, 20);
      if (a.doomed() || a.state() == ShrinkAgreement::State::excluded || now_s() > commit_by) {
        made->engine->control().abort();
        return;
      }
      if (connected.load() && commit_by == ShrinkAgreement::kNever) {
        a.created();
        flush(engine->control(), a);
        commit_by = now_s() + commit_by_slack;
      }
      if (a.all_created()) return;
    }
  });
  struct Stop {
    std::atomic<bool>& done;
    std::thread& t;
    ~Stop() {
      done.store(true);
      if (t.joinable()) t.join();
    }
  } stop{done, watcher};
  made->connect_overlay();
  connected.store(true);
  watcher.join();
  if (!a.all_created())
    throw PeerError(-1, "a member of attempt " + std::to_string(a.epoch() + 1) +
                            " did not connect the new communicator (it died, or failed to connect another)");
  return Comm(made);
}

Comm Comm::shrink() {
  CommState& s = checked();
  if (s.group_depth > 0) throw InvalidUsage("shrink: not allowed inside group_start/group_end");
  if (s.shrunk)
    throw InvalidUsage("shrink: this communicator was already shrunk; shrink the communicator that shrink returned");
  s.shrunk = true;
  return s.shrink();
}

}  // namespace strata
