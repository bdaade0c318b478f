// Comm::shrink's agreement on who is alive, as a state machine without sockets or a clock:
// core/shrink.cpp feeds it the notices read from the parent's control sockets, the
// connections that closed and the time, and sends what it asks to; the unit test runs it
// over a simulated network where ranks die or stop at any moment.
//
// Every survivor sends every other rank a join ('J', with the port of its new listener)
// and floods each rank it finds dead ('D': its connection closed, or it stayed silent past
// a deadline). The lowest rank not known dead coordinates: once every rank it does not
// know dead has joined, or STRATA_TIMEOUT after the epoch began (the silent ones are then
// dead), it sends the decision (the ranks left out, each member's port) to every member.
// A rank relays the first decision it receives to every member before taking it, so when
// any survivor takes a decision every survivor receives it, even if its sender died half
// way. A coordinator that dies is replaced by the next lowest rank; one that stays silent
// STRATA_TIMEOUT + 1 s after its join (or after it became coordinator) is declared dead.
//
// Two ranks can still take different decisions (a coordinator died while sending, and its
// successor decided before a relay reached it). Their new communicators then cannot
// connect (the tag depends on the decision); so can none whose member dies while it is
// being connected. Connecting is not all or nothing (a rank's side is done when the ranks
// it connects to answered), so a member that connected says so ('C') and takes the new
// communicator only when every member has: a member that fails to connect begins the
// next epoch ('J' with a higher epoch), which dooms the others' (doomed()), and the next
// epoch knows the deaths the last one lacked.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/notice.hpp"

namespace strata {

class ShrinkAgreement {
 public:
  using Time = double;  // seconds on any monotonic clock
  static constexpr Time kNever = std::numeric_limits<double>::infinity();
  struct Out {
    int to;
    Notice n;
  };
  enum class State { agreeing, decided, created, excluded };

  ShrinkAgreement(int me, int nranks, double timeout_s);

  // Epoch 0. `culprit`: the rank whose failure this rank knows of (-1: none), told to ranks
  // still in a call on the parent; `known_dead`: ranks already known dead (a call found
  // them stopped).
  void begin(Time now, uint16_t port, int culprit, const std::vector<int>& known_dead);
  // Connecting the decided communicator failed (or was doomed): the next epoch, with a new
  // listener's port.
  void retry(Time now, uint16_t port);
  // Connecting succeeded on this rank: the members are told ('C'). The new communicator
  // is taken only once every member said so (all_created()); until then a member that
  // dies without saying so, or begins the next epoch, dooms it.
  void created();
  bool all_created() const;

  void notice(int from, const Notice& n, Time now);
  void closed(int from, Time now);  // its connection closed, or it said goodbye
  void tick(Time now);
  Time next_deadline() const;  // when tick() next has something to do
  std::vector<Out> take_outgoing();

  State state() const { return state_; }
  int epoch() const { return epoch_; }
  // Decided: a member is known dead, or has begun a later epoch; the communicator being
  // connected can never be whole.
  bool doomed() const { return doomed_; }
  bool is_closed(int j) const { return closed_[static_cast<size_t>(j)]; }
  // The decision: members (old ranks, ascending) with their listeners' ports, and the
  // ranks left out.
  const std::vector<int>& members() const { return members_; }
  const std::vector<uint16_t>& member_ports() const { return member_ports_; }
  const std::vector<int>& left_out() const { return left_out_; }
  // Excluded: why, and the rank that said so.
  const std::string& why_excluded() const { return why_excluded_; }
  int excluded_by() const { return excluded_by_; }

 private:
  struct Decision {  // notices of a decision received from one peer, until its 'M'
    std::vector<int> out;
    std::vector<std::pair<int, uint16_t>> ports;
  };
  void start_epoch(Time now);
  void send(int to, const Notice& n);
  void add_dead(int x, bool tell_it, Time now);
  void follow_coordinator(Time now);
  void try_decide();
  void send_decision(int skip);
  void adopt(const Decision& d, int from);
  void exclude(int by, const std::string& why);
  Time coordinator_deadline() const;
  bool alive(int j) const { return !dead_[static_cast<size_t>(j)]; }

  int me_, n_;
  double timeout_s_;
  int epoch_ = 0;
  State state_ = State::agreeing;
  Time begun_ = 0;         // this epoch began
  int coord_ = -1;
  Time coord_since_ = 0;   // this rank took coord_ as its coordinator
  uint16_t port_ = 0;
  int culprit_ = -1;
  std::vector<char> dead_, closed_;
  std::vector<int> joined_epoch_, created_epoch_;
  std::vector<Time> joined_at_;
  std::vector<uint16_t> port_of_;
  std::vector<Decision> incoming_;
  std::vector<int> members_, left_out_;
  std::vector<uint16_t> member_ports_;
  bool doomed_ = false;
  std::string why_excluded_;
  int excluded_by_ = -1;
  std::vector<Out> out_;
};

}  // namespace strata
