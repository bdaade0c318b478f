// Connections made on need (NCCL's runtime connect): a pair of ranks is connected the
// first time a plan, a point-to-point call, the failure overlay or a shrink needs it, by
// both ranks alike and without a global step, so a rank holds only what its plans use.
//
// The higher rank of a pair calls the lower one's listener (its address is in the
// bootstrap's table): a hello with the job's secret, then each end's transport offer as a
// setup frame on that control socket. Per memory kind, both ends then choose the same row
// of the transport table (transports/transport_table.hpp) and make its link: a row with a
// handshake swaps connection info as setup frames, tcp's data sockets are called like the
// control socket; a token each way says both links are made. Each pair moves on its own,
// as far as it can without blocking, whenever this rank waits inside a call (the engine's
// waits and the control channel's stalls call service()), so two ranks that need each
// other meet whatever else either is waiting for. A lower rank that needs a higher one asks
// it to call (a probe at its listener), and repeats the probe now and then: a listener that
// refuses names a peer that died before connecting (docs/architecture.md, "Connections").
#pragma once

#include <array>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/bootstrap/bootstrap.hpp"
#include "core/control_channel.hpp"
#include "ground/memory_kind.hpp"
#include "ground/settings.hpp"
#include "ground/socket.hpp"
#include "transports/link_setup.hpp"
#include "transports/transport.hpp"
#include "transports/transport_table.hpp"

namespace strata {

using Links = std::vector<std::unique_ptr<Link>>;  // by peer rank; null where not connected
using net::Accepted;

// Hosts of ranks a and b share memory and neither forces tcp.
bool use_shm(const bootstrap::RankInfo& a, const bootstrap::RankInfo& b);

class Connector final : public ControlChannel::Sink {
 public:
  // `in`: where this rank accepts (table[rank].listen's port), with what it took before
  // (while the bootstrap delivered the table). Connections must present `secret` and
  // `comm_tag`. `table` outlives the connector.
  Connector(int rank, const std::vector<bootstrap::RankInfo>& table, net::Incoming in,
            const bootstrap::Secret& secret, uint64_t comm_tag, const Config& cfg, ControlChannel& control);
  ~Connector() override;

  // Starts connecting `peer`: its control connection, then its links of `kind` (host links
  // first, which device links between hosts wrap).
  void want(int peer, MemoryKind kind);
  // Only the control connection (the failure overlay, the shrink's agreement).
  void want_control(int peer);
  // The links of `kind` to `peer` are made on both ends (a pair no row serves is ready
  // with no link: the engine names it when a plan uses it).
  bool ready(int peer, MemoryKind kind) const;
  // The control connection is up and both offers have arrived.
  bool control_ready(int peer) const;
  // Device links are made only while allowed: on the caller's thread, before a device call
  // holds a user's stream (a GPU driver call that creates could wait for that stream).
  void allow_device(bool on) { device_allowed_ = on; }
  bool device_allowed() const { return device_allowed_; }
  // What went wrong with a pair (its listener refuses: the peer exited; it closed during
  // setup; it sent what is not setup) is kept with the pair, not thrown where it was met: it
  // fails the waits that need that pair (raise), and no other.
  bool failed(int peer) const { return pairs_[static_cast<size_t>(peer)].failure != nullptr; }
  void raise(int peer) const {
    if (const std::exception_ptr& e = pairs_[static_cast<size_t>(peer)].failure) std::rethrow_exception(e);
  }

  Links& links(MemoryKind k) { return links_[static_cast<size_t>(k)]; }
  const Links& links(MemoryKind k) const { return links_[static_cast<size_t>(k)]; }
  // How many peers this rank holds a control connection to, and data sockets in all.
  size_t connected_peers() const { return control_.connections(); }

  // ControlChannel::Sink: the setup frames of this rank's pairs; service() takes incoming
  // connections and moves every pair in progress as far as it goes without blocking.
  void setup_frame(int peer, const Notice& n, const char* payload) override;
  void service() override { (void)progress(); }
  void wait_fds(std::vector<pollfd>& out) const override { in_.acceptor->wait_fds(out); }
  // The same, saying whether anything moved.
  bool progress();

 private:
  struct KindState {
    bool wanted = false, chosen = false;
    const TransportRow* row = nullptr;  // null once chosen: no row carries the kind to this peer
    bool info_sent = false, have_remote = false, token_sent = false, token_got = false, noted = false;
    uint8_t note = 0;  // the peer's connected_note
    std::vector<char> remote;
    // Made, waiting for the peer's token: the engine sees a link only once the peer has
    // made its side too (a shm receiver publishes what the sender reads in its link's making).
    std::unique_ptr<Link> made;
  };
  enum class Control : uint8_t { none, awaited, up };
  struct Pair {
    Control control = Control::none;
    bool offer_got = false;
    bool data_dialed = false;
    std::exception_ptr failure;  // the pair cannot be connected, and why
    bool active = false;  // in active_
    TransportOffer theirs{};
    net::Clock::time_point next_probe{};
    std::array<KindState, kNumMemoryKinds> kinds;
  };

  void start(int peer);
  void activate(int peer);
  // The higher rank's side: the control socket, then the offer.
  void dial(int peer);
  // Connects to `peer`'s listener and presents this rank's hello for `role` (socket `index`).
  net::Fd call(int peer, net::Role role, int index);
  void take(Accepted a);  // an incoming connection
  void take_caught(Accepted a);  // the same, a failure kept with its pair
  void take_setup(int peer, const Notice& n, const char* payload);
  // A lower rank awaiting `peer`'s call: is its listener still there?
  void probe_listener(int peer);
  void unreachable_peer(int peer, const std::string& why);
  void fail_pair(int peer, std::exception_ptr why);
  // Moves one pair's links forward; true if anything happened.
  bool advance(int peer);
  bool advance_kind(int peer, MemoryKind kind);
  std::unique_ptr<Link> connect_link(LinkSetup& setup, int peer, const std::vector<char>& remote);
  int data_sockets(int peer) const;
  bool has_data_sockets(int peer) const;
  LinkSetup& setup_for(const TransportRow& row, MemoryKind kind);
  void send_setup(int peer, char step, MemoryKind kind, const void* payload, size_t len);
  std::string who(int peer) const { return "rank " + std::to_string(peer); }

  int rank_, nranks_;
  const std::vector<bootstrap::RankInfo>& table_;
  net::Incoming in_;
  bootstrap::Secret secret_;
  uint64_t tag_;
  const Config& cfg_;
  ControlChannel& control_;
  TransportOffer offer_{};
  bool device_allowed_ = false;
  std::vector<Pair> pairs_;                          // by rank
  std::vector<int> active_;                          // pairs with something to do
  std::array<Links, kNumMemoryKinds> links_;         // by memory kind, then peer
  std::vector<std::vector<net::Fd>> sockets_;        // by peer: tcp data sockets, until a link takes them
  std::map<std::pair<const TransportRow*, MemoryKind>, std::unique_ptr<LinkSetup>> setups_;
};

}  // namespace strata
