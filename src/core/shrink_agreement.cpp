#include "core/shrink_agreement.hpp"

#include <algorithm>

namespace strata {

namespace {
// A coordinator has STRATA_TIMEOUT to hear from every rank, so the others give it this
// much more before they take it for stopped.
constexpr double kCoordinatorSlack = 1.0;
// Every failed epoch knows one death more than the last, so more epochs than ranks means
// something else is wrong; the epoch also travels in a byte.
constexpr int kMaxEpochs = 250;
}  // namespace

ShrinkAgreement::ShrinkAgreement(int me, int nranks, double timeout_s)
    : me_(me),
      n_(nranks),
      timeout_s_(timeout_s),
      dead_(static_cast<size_t>(nranks)),
      closed_(static_cast<size_t>(nranks)),
      joined_epoch_(static_cast<size_t>(nranks), -1),
      created_epoch_(static_cast<size_t>(nranks), -1),
      joined_at_(static_cast<size_t>(nranks)),
      port_of_(static_cast<size_t>(nranks)),
      incoming_(static_cast<size_t>(nranks)) {}

void ShrinkAgreement::begin(Time now, uint16_t port, int culprit, const std::vector<int>& known_dead) {
  port_ = port;
  culprit_ = culprit;
  epoch_ = 0;
  start_epoch(now);
  for (int x : known_dead)
    if (x >= 0 && x < n_ && x != me_) add_dead(x, true, now);
  try_decide();
}

void ShrinkAgreement::retry(Time now, uint16_t port) {
  if (state_ == State::excluded) return;  // out for good: another epoch would undo it
  port_ = port;
  if (++epoch_ >= std::min(kMaxEpochs, n_ + 2))
    return exclude(-1, "no agreement after " + std::to_string(epoch_) + " attempts");
  start_epoch(now);
  try_decide();
}

void ShrinkAgreement::start_epoch(Time now) {
  state_ = State::agreeing;
  begun_ = now;
  doomed_ = false;
  members_.clear();
  member_ports_.clear();
  left_out_.clear();
  for (Decision& d : incoming_) d = {};
  coord_ = -1;
  follow_coordinator(now);
  const Notice join = shrink_notice('J', epoch_, culprit_, port_);
  for (int j = 0; j < n_; ++j)
    if (alive(j)) send(j, join);
}

void ShrinkAgreement::created() {
  if (state_ == State::created) return;
  state_ = State::created;
  for (int m : members_) send(m, shrink_notice('C', epoch_, me_));
}

bool ShrinkAgreement::all_created() const {
  if (state_ != State::created || doomed_) return false;
  for (int m : members_)
    if (m != me_ && created_epoch_[static_cast<size_t>(m)] < epoch_) return false;
  return true;
}

void ShrinkAgreement::send(int to, const Notice& n) {
  if (to != me_ && !closed_[to]) out_.push_back({to, n});
}

void ShrinkAgreement::add_dead(int x, bool tell_it, Time now) {
  if (dead_[x]) return;
  dead_[x] = 1;
  const Notice d = shrink_notice('D', epoch_, x);
  for (int j = 0; j < n_; ++j)
    if (alive(j)) send(j, d);
  // Alive but silent (stopped, or late): should it read its sockets again, it learns that
  // it was left out rather than going on alone.
  if (tell_it) send(x, d);
  if (state_ == State::agreeing) follow_coordinator(now);
  if (state_ != State::agreeing && std::binary_search(members_.begin(), members_.end(), x)) doomed_ = true;
}

void ShrinkAgreement::follow_coordinator(Time now) {
  int c = 0;
  while (c < n_ && !alive(c)) ++c;
  if (c != coord_) {
    coord_ = c;
    coord_since_ = now;
  }
}

void ShrinkAgreement::try_decide() {
  if (state_ != State::agreeing || coord_ != me_) return;
  for (int j = 0; j < n_; ++j)
    if (j != me_ && alive(j) && joined_epoch_[j] < epoch_) return;
  for (int j = 0; j < n_; ++j) {
    if (alive(j)) {
      members_.push_back(j);
      member_ports_.push_back(j == me_ ? port_ : port_of_[j]);
    } else {
      left_out_.push_back(j);
    }
  }
  state_ = State::decided;
  send_decision(-1);
}

void ShrinkAgreement::send_decision(int skip) {
  std::vector<Notice> d;
  for (int x : left_out_) d.push_back(shrink_notice('K', epoch_, x));
  for (size_t i = 0; i < members_.size(); ++i) d.push_back(shrink_notice('L', epoch_, members_[i], member_ports_[i]));
  d.push_back(shrink_notice('M', epoch_, static_cast<int32_t>(left_out_.size())));
  for (int m : members_)
    if (m != skip)
      for (const Notice& n : d) send(m, n);
}

void ShrinkAgreement::adopt(const Decision& d, int from) {
  std::vector<std::pair<int, uint16_t>> ports = d.ports;
  std::sort(ports.begin(), ports.end());
  left_out_ = d.out;
  std::sort(left_out_.begin(), left_out_.end());
  for (auto& [m, port] : ports) {
    members_.push_back(m);
    member_ports_.push_back(port);
  }
  if (!std::binary_search(members_.begin(), members_.end(), me_))
    return exclude(from, "the decision relayed by rank " + std::to_string(from) + " leaves this rank out");
  state_ = State::decided;
  send_decision(from);  // relayed before it is taken: see the header
  for (int m : members_)
    if (!alive(m) || joined_epoch_[m] > epoch_) doomed_ = true;
}

void ShrinkAgreement::exclude(int by, const std::string& why) {
  state_ = State::excluded;
  excluded_by_ = by;
  why_excluded_ = why;
}

void ShrinkAgreement::notice(int from, const Notice& n, Time now) {
  if (from < 0 || from >= n_ || from == me_ || closed_[from] || state_ == State::excluded) return;
  const int e = n.why;
  switch (n.kind) {
    case 'J':
      joined_epoch_[from] = std::max(joined_epoch_[from], e);
      port_of_[from] = port_of(n);
      joined_at_[from] = now;
      if (!alive(from)) {
        send(from, shrink_notice('D', epoch_, from));  // left out already: it must not go on alone
        return;
      }
      if (e > epoch_ && state_ == State::agreeing) {
        // It failed to connect a decision this rank never received: that epoch is over.
        epoch_ = e;
        start_epoch(now);
      } else if (e > epoch_ && (state_ == State::decided || state_ == State::created)) {
        doomed_ = true;  // it failed to connect this decision: no member may take it
      }
      try_decide();
      return;
    case 'D':
      if (n.origin == me_)
        return exclude(from, "rank " + std::to_string(from) + " found this rank dead: it did not join the shrink within "
                                 "STRATA_TIMEOUT (stopped, or busy elsewhere), and the others went on without it");
      if (n.origin >= 0 && n.origin < n_) add_dead(n.origin, true, now);
      try_decide();
      return;
    case 'K': incoming_[from].out.push_back(n.origin); return;
    case 'L': incoming_[from].ports.push_back({n.origin, port_of(n)}); return;
    case 'M': {
      Decision d = std::move(incoming_[from]);
      incoming_[from] = {};
      const bool whole = d.out.size() == static_cast<size_t>(n.origin) && d.out.size() + d.ports.size() == static_cast<size_t>(n_);
      if (e == epoch_ && state_ == State::agreeing && whole) adopt(d, from);
      return;
    }
    case 'C':
      created_epoch_[from] = std::max(created_epoch_[from], e);
      return;
  }
}

void ShrinkAgreement::closed(int from, Time now) {
  if (from < 0 || from >= n_ || from == me_ || closed_[from]) return;
  closed_[from] = 1;
  // A member that connected this epoch's communicator may destroy the parent at once.
  if (state_ != State::agreeing && created_epoch_[from] == epoch_) {
    dead_[from] = 1;
    return;
  }
  add_dead(from, false, now);
  try_decide();
}

ShrinkAgreement::Time ShrinkAgreement::coordinator_deadline() const {
  Time since = coord_since_;
  if (joined_epoch_[coord_] >= epoch_) since = std::max(since, joined_at_[coord_]);
  return since + timeout_s_ + kCoordinatorSlack;
}

ShrinkAgreement::Time ShrinkAgreement::next_deadline() const {
  if (state_ != State::agreeing) return kNever;
  return coord_ == me_ ? begun_ + timeout_s_ : coordinator_deadline();
}

void ShrinkAgreement::tick(Time now) {
  if (state_ != State::agreeing || now < next_deadline()) return;
  if (coord_ == me_) {
    for (int j = 0; j < n_; ++j)
      if (j != me_ && alive(j) && joined_epoch_[j] < epoch_) add_dead(j, true, now);
  } else {
    add_dead(coord_, true, now);
  }
  try_decide();
}

std::vector<ShrinkAgreement::Out> ShrinkAgreement::take_outgoing() {
  std::vector<Out> o;
  o.swap(out_);
  return o;
}

}  // namespace strata
