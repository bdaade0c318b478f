// The failure protocol over a communicator's control sockets (one per connected pair of
// ranks: connections are made on need, core/connector.hpp): it turns every way a peer can
// fail into an error naming a rank — a closed connection, an abort or refusal notice from
// another rank, a goodbye while data is still expected, no progress within STRATA_TIMEOUT
// (then a liveness probe decides whom to blame) — and tells the peers it is connected to
// when this rank fails, refuses a call, leaves or aborts. A rank that fails on a notice
// tells its own peers in turn, so a failure floods over the connections that exist and
// reaches every rank of a call (the plan of a collective connects all its ranks). The
// engine owns one and calls it while a call stalls (docs/architecture.md, "Engine").
//
// The sockets also carry the setup frames of a pair's connection ('S'), which go to the
// connector (Sink), and the shrink's notices, which wait for Comm::shrink.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/notice.hpp"
#include "ground/call.hpp"
#include "ground/settings.hpp"
#include "ground/socket.hpp"
#include "strata/error.hpp"

namespace strata {

class ControlChannel {
 public:
  using Clock = std::chrono::steady_clock;

  // What the control sockets carry besides the failure protocol, and who moves connections
  // forward while a call stalls: the connector.
  class Sink {
   public:
    virtual ~Sink() = default;
    // A setup frame ('S') from `peer` with its payload (n.origin bytes). May throw.
    virtual void setup_frame(int peer, const Notice& n, const char* payload) = 0;
    // Accepts and moves forward connections without blocking. May throw.
    virtual void service() = 0;
    // What service() waits on (the listener), for sleeping in poll().
    virtual void wait_fds(std::vector<pollfd>& out) const = 0;
  };

  // What the channel tracks over the stalls of one wait; zero at the start of the wait.
  struct Watch {
    Clock::time_point last_check;  // the control sockets were last read (zero: not in this wait)
    Clock::time_point probe_sent;  // this stall's liveness probe went out (zero: none yet)
    // The wait stalls (nothing moved for a while) at `now`.
    void stall_begins(Clock::time_point now) {
      probe_sent = Clock::time_point{};
      if (last_check == Clock::time_point{}) last_check = now;
    }
  };

  ControlChannel(int rank, int nranks, const Config& cfg);
  void set_sink(Sink* sink) { sink_ = sink; }

  // ---- connections (the connector's) ----
  // The control connection to `peer` is up: made non-blocking; notices posted meanwhile go out.
  void add(int peer, net::Fd fd);
  bool connected(int peer) const { return peers_[static_cast<size_t>(peer)].fd.valid(); }
  // A frame and its payload to a connected peer; throws PeerError when the peer is gone.
  void send_frame(int peer, const Notice& n, const void* payload = nullptr, size_t len = 0);
  // A notice to `peer`, now if connected, else once it is (the shrink's agreement).
  void post(int peer, const Notice& n);
  // How many peers have a control connection.
  size_t connections() const;

  // ---- during a call ----
  // The first error of the engine, if it failed: every later call throws it.
  const std::exception_ptr& failed() const { return failed_; }
  // While a wait stalls on the ranks in `waited` (nothing moved since `last_progress`):
  // throws when the communicator was aborted or revoked, reads the control sockets and
  // lets the sink move connections every 2 ms, fails a wait on a rank that left, and past
  // STRATA_TIMEOUT probes the peers and names the rank that stopped.
  void on_stall(Watch& w, Clock::time_point now, Clock::time_point last_progress, const std::vector<int>& waited);
  // While on, the notices of calls ('A', 'R', a shrink's) are kept for the first call to
  // read instead of failing the wait that reads them: creation connects the failure overlay
  // while peers that are done creating may already run calls, and fail them.
  void defer_notices(bool on) { deferring_ = on; }
  bool has_deferred() const { return !deferred_.empty(); }
  // What this rank is doing, for its answers to liveness probes: the call the engine runs
  // (set per call: plain fields, no text), or a device call waiting for its stream.
  void doing_call(Collective coll, size_t count, DataType type) {
    doing_ = {coll, count, type, 0, Clock::time_point{}};
  }
  void doing_stream_wait(uint64_t device_call) { doing_ = {Collective::all_reduce, 0, DataType::uint8, device_call, Clock::now()}; }
  // While a device call's worker waits for its stream: answers probes (and fails the wait
  // on a peer's abort notice), so the rank is not taken for stopped.
  void serve_while_waiting() {
    const auto now = Clock::now();
    if (now - served_ < std::chrono::milliseconds(2)) return;
    served_ = now;
    check_control();
  }
  // Reads the control sockets now (on_stall does every 2 ms) and lets the sink move.
  void check_now() {
    check_control();
    if (sink_) sink_->service();
  }
  // What to sleep on while stalled: the control sockets and the sink's.
  void wait_fds(std::vector<pollfd>& out) const;
  // `peer` said goodbye (destroyed its communicator).
  bool left(int peer) const { return peers_[static_cast<size_t>(peer)].left; }
  // The error for a transfer a departed peer left unfinished.
  PeerError departed(int peer) const;
  // A running operation failed with `e`: records it (the engine stays failed), names the
  // culprit (an abort notice already waiting names it better than the link's peer), tells
  // every connected peer, and rethrows the error that names it.
  [[noreturn]] void fail_call(std::exception_ptr e);

  // Tells every connected peer this rank is leaving on purpose (destroy).
  void say_goodbye();
  // Callable from any thread: running and later operations fail, connections are shut
  // down so peers see this rank leave.
  void abort();
  // Comm::shrink, from any thread: an operation running now fails at its next stall, and
  // nothing is sent to the peers (the shrink's own notices tell them).
  void revoke() { revoked_.store(true); }
  // After abort() or revoke(): the error an operation still waiting fails with; else null.
  std::exception_ptr interrupted() const;
  // Once nothing runs any more: every later call throws `why`.
  void fail_later_calls(std::exception_ptr why) {
    if (!failed_) failed_ = why;
  }
  // This rank refused a call's arguments on its own (`what`: its message): every connected
  // peer is told (and tells its own), so the call fails on every rank; later calls throw.
  void refuse(Fault fault, Collective coll, const std::string& what);
  // The rank whose failure failed this engine (-1: none known), and whether it was found
  // stopped (it did not answer the liveness probe).
  int culprit() const { return culprit_; }
  bool culprit_stopped() const { return culprit_stopped_; }

  // ---- for Comm::shrink, once no call runs ----
  class Reader {
   public:
    virtual ~Reader() = default;
    virtual void notice(int from, const Notice& n) = 0;  // a shrink notice
    virtual void closed(int from) = 0;                   // its connection closed, or it said goodbye
  };
  // Hands `r` the shrink notices a failed call left, then waits up to `wait_ms` for the
  // control sockets (and the sink's) and hands it every shrink notice and closed
  // connection; probes are answered, setup frames go to the sink, the rest is skipped.
  void read(Reader& r, int wait_ms);

 private:
  struct Peer {
    net::Fd fd;
    std::vector<char> in;  // bytes read, not yet parsed
    size_t used = 0;       // of `in`, parsed
    std::vector<Notice> queued;  // posted before the connection was up
    bool left = false;     // said goodbye
    bool closed = false;   // its socket closed (reported once)
    bool answered = false;  // answered this stall's liveness probe
    int waits_on = -1;      // its answer: the rank it waits on
    std::string doing;      // its answer: what it is doing
  };
  // Reads what `peer`'s socket holds into its buffer: false once it has closed.
  bool fill(Peer& p);
  // The next whole frame in `p`'s buffer (payload: n.origin bytes after it), consumed.
  bool next_frame(Peer& p, Notice& n, const char*& payload);
  // Every frame waiting on every socket, each handled by `handle(from, notice, payload)`;
  // `closed(from)` for a socket that closed after its frames.
  template <class Handle, class Closed>
  void read_all(const Handle& handle, const Closed& closed, int wait_ms);
  // Reads every notice waiting: answers probes, records answers and goodbyes, passes setup
  // frames on; throws on a dead, aborting, refusing or shrinking peer.
  void check_control();
  void answer_probe(int to);
  std::string doing_text() const;
  std::string answered_doing(int peer) const;  // "; rank 3 answered that it is ..." or ""
  // After a link to `culprit` failed: an abort notice already waiting names the real
  // culprit better than the link's peer, which may only have exited because of it; a
  // goodbye from the culprit says it destroyed the communicator.
  void prefer_abort_notice(int culprit);
  [[noreturn]] void throw_notice_error(const Notice& n, int from);  // for an 'A' or 'R' notice; sets relay_
  PeerError shrinking_error(const Notice& n, int from);  // a peer's shrink began ('J'); sets relay_
  // The liveness probe on a timeout: every connected peer is asked, and answers from check_control.
  void send_probe();
  // Peers that have not answered the probe, and a waited-on rank not even connected.
  std::vector<int> silent_peers(const std::vector<int>& waited) const;
  // Names the rank that stopped: the one waited on if it did not answer, else another
  // silent one; when all answered, the rank waited on, saying that it is unsure.
  [[noreturn]] void fail_stuck(Clock::duration probed, const std::vector<int>& waited);
  void fail(std::exception_ptr e, int culprit);
  void tell_everyone(const Notice& n);

  int rank_, nranks_;
  std::vector<Peer> peers_;  // by rank; no fd until connected
  Sink* sink_ = nullptr;
  std::chrono::duration<double> timeout_;
  std::string timeout_text_;       // STRATA_TIMEOUT and where it came from, for messages
  int waiting_on_ = -1;            // the rank this rank's current stall waits on (its probe answers say so)
  struct Doing {
    Collective coll;
    size_t count;
    DataType type;
    uint64_t device_call;           // nonzero: that device call waits for its stream, since `since`
    Clock::time_point since;
  } doing_{Collective::all_reduce, 0, DataType::uint8, 0, Clock::time_point{}};
  Clock::time_point served_{};
  std::vector<std::pair<int, Notice>> shrink_notices_;  // arrived during a call, for the shrink
  bool deferring_ = false;
  std::vector<std::pair<int, Notice>> deferred_;  // read while deferring_, handled by the next check
  Notice told_{};                // the failure this rank told ('A' or 'R'), for peers connected later
  Notice relay_{};               // what fail() tells the peers; kind 0: an abort naming the culprit
  bool from_notice_ = false;     // the failure came from a peer's notice
  std::exception_ptr failed_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> revoked_{false};
  int culprit_ = -1;
  bool culprit_stopped_ = false;
};

}  // namespace strata
