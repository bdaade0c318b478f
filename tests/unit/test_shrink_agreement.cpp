// Comm::shrink's agreement (core/shrink_agreement.hpp) over a simulated network: ranks join
// at different moments, notices take random delays (in order on each pair), a rank may be
// dead before the shrink, die or stop at any moment during it, and connecting the new
// communicator succeeds only when every member of one decision is alive and has that same
// decision (as the tags of core/shrink.cpp make it). Thousands of seeded runs check that the
// shrink ends in bounded time on every survivor, that everyone who connects has the same
// members, that no rank that stayed alive is left out and no dead one kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>

#include "core/shrink_agreement.hpp"

using strata::Notice;
using strata::ShrinkAgreement;
using State = ShrinkAgreement::State;

namespace {

constexpr double kTimeout = 1.0;  // STRATA_TIMEOUT of the simulated ranks
constexpr double kNever = ShrinkAgreement::kNever;

enum class Fate { alive, dead_before, dies, stops, stopped_before };

struct Scenario {
  int n;
  std::vector<Fate> fate;
  std::vector<double> at;  // when it dies or stops (dies, stops), or joins (alive)
};

struct Outcome {
  std::vector<State> state;
  std::vector<std::vector<int>> members;
  std::vector<double> done_at;  // when it created or was excluded
  double end = 0;
  std::string log;
};

class Sim {
 public:
  Sim(const Scenario& s, uint32_t seed) : s_(s), rng_(seed), last_(s.n, std::vector<double>(s.n, 0.0)) {
    for (int r = 0; r < s.n; ++r) a_.push_back(std::make_unique<ShrinkAgreement>(r, s.n, kTimeout));
    out_.state.assign(s.n, State::agreeing);
    out_.members.resize(s.n);
    out_.done_at.assign(s.n, kNever);
    running_.assign(s.n, false);
    creating_.assign(s.n, false);
    create_by_.assign(s.n, kNever);
    for (int r = 0; r < s.n; ++r) {
      switch (s.fate[r]) {
        case Fate::dead_before: schedule_close_all(r, std::uniform_real_distribution<double>(0, 0.005)(rng_)); break;
        case Fate::alive: push(s.at[r], Ev::start, r, r, {}); break;
        case Fate::dies:
          push(std::uniform_real_distribution<double>(0, 0.02)(rng_), Ev::start, r, r, {});
          push(s.at[r], Ev::die, r, r, {});
          break;
        case Fate::stops:
          push(std::uniform_real_distribution<double>(0, 0.02)(rng_), Ev::start, r, r, {});
          push(s.at[r], Ev::stop, r, r, {});
          break;
        case Fate::stopped_before: break;
      }
    }
  }

  Outcome run() {
    for (int steps = 0; steps < 200000; ++steps) {
      // The earliest of: an event, an agreement's deadline, a connecting rank's deadline.
      double t = q_.empty() ? kNever : q_.top().t;
      int due = -1;
      for (int r = 0; r < s_.n; ++r) {
        if (!running_[r]) continue;
        const double d = creating_[r] ? create_by_[r] : a_[r]->next_deadline();
        if (d < t) t = d, due = r;
      }
      if (t == kNever) break;
      now_ = std::max(now_, t);  // a deadline already past is taken now
      if (due >= 0) {
        if (creating_[due]) fail_creation(due);
        else a_[due]->tick(now_);
        after(due);
        continue;
      }
      Ev e = q_.top();
      q_.pop();
      handle(e);
    }
    out_.end = now_;
    return out_;
  }

 private:
  struct Ev {
    enum Kind { start, deliver, close, die, stop, complete } kind;
    double t;
    uint64_t seq;
    int from, to;
    Notice n;
    bool operator<(const Ev& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  void push(double t, Ev::Kind k, int from, int to, Notice n) { q_.push({k, t, seq_++, from, to, n}); }

  // After everything `r` sent to each peer, that peer sees its connection close.
  void schedule_close_all(int r, double t) {
    for (int j = 0; j < s_.n; ++j)
      if (j != r) push(std::max(t, last_[r][j]) + 1e-6, Ev::close, r, j, {});
  }

  void handle(const Ev& e) {
    switch (e.kind) {
      case Ev::start:
        if (gone_[e.to]) return;
        running_[e.to] = started_[e.to] = true;
        a_[e.to]->begin(now_, static_cast<uint16_t>(1000 + e.to), -1, {});
        after(e.to);
        // What arrived before it began waited in its sockets.
        for (const Ev& w : waiting_[e.to]) handle(w);
        waiting_[e.to].clear();
        break;
      case Ev::deliver:
      case Ev::close:
        if (!started_[e.to] && !gone_[e.to]) {
          waiting_[e.to].push_back(e);
          return;
        }
        if (!running_[e.to]) return;
        if (e.kind == Ev::deliver) {
          a_[e.to]->notice(e.from, e.n, now_);
          after(e.to);
          return;
        }
        a_[e.to]->closed(e.from, now_);
        after(e.to);
        break;
      case Ev::die:
      case Ev::stop:
        if (out_.done_at[e.to] != kNever) return;  // it finished first
        running_[e.to] = false;
        gone_[e.to] = true;
        out_.log += (e.kind == Ev::die ? " die " : " stop ") + std::to_string(e.to) + "@" + std::to_string(now_);
        if (e.kind == Ev::die) schedule_close_all(e.to, now_);
        break;
      case Ev::complete: {
        // The connecting of one decision completes when every member is connecting it.
        auto it = groups_.find(e.n.origin);
        if (it == groups_.end()) return;
        const std::vector<int> members = it->second.members;
        for (int m : members)
          if (!running_[m] || !creating_[m] || key_[m] != e.n.origin) return;
        for (int m : members) {
          creating_[m] = false;
          a_[m]->created();
          finish(m);
          after(m);
        }
        break;
      }
    }
  }

  // Sends what rank r asked to, then follows its state.
  void after(int r) {
    for (const auto& o : a_[r]->take_outgoing()) {
      std::uniform_real_distribution<double> delay(1e-4, 5e-3);
      const double t = std::max(now_ + delay(rng_), last_[r][o.to] + 1e-7);
      last_[r][o.to] = t;
      push(t, Ev::deliver, r, o.to, o.n);
    }
    if (!running_[r]) return;
    ShrinkAgreement& a = *a_[r];
    if (a.state() == State::excluded) {
      finish(r);
      return;
    }
    if (a.state() != State::decided) return;
    if (creating_[r]) {
      if (a.doomed()) fail_creation(r), after(r);
      return;
    }
    if (a.doomed()) {  // the driver does not even try
      a.retry(now_, static_cast<uint16_t>(2000 + r));
      after(r);
      return;
    }
    creating_[r] = true;
    create_by_[r] = now_ + kTimeout;
    const int key = key_of(a.epoch(), a.members());
    key_[r] = key;
    push(now_ + 1e-3, Ev::complete, r, r, Notice{0, 0, 0, 0, key});
  }

  int key_of(int epoch, const std::vector<int>& members) {
    for (auto& [k, g] : groups_)
      if (g.epoch == epoch && g.members == members) return k;
    const int k = static_cast<int>(groups_.size());
    groups_[k] = {epoch, members};
    return k;
  }

  void fail_creation(int r) {
    creating_[r] = false;
    a_[r]->retry(now_, static_cast<uint16_t>(2000 + r));
  }

  // Created or excluded: the rank leaves, and after a while destroys the parent.
  void finish(int r) {
    running_[r] = false;
    out_.state[r] = a_[r]->state();
    out_.members[r] = a_[r]->members();
    out_.done_at[r] = now_;
    if (out_.state[r] == State::excluded)
      out_.log += " rank " + std::to_string(r) + " excluded@" + std::to_string(now_) + ": " + a_[r]->why_excluded();
    schedule_close_all(r, now_ + std::uniform_real_distribution<double>(0, 0.01)(rng_));
  }

  struct Group {
    int epoch;
    std::vector<int> members;
  };
  Scenario s_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<ShrinkAgreement>> a_;
  std::priority_queue<Ev> q_;
  uint64_t seq_ = 0;
  double now_ = 0;
  std::vector<std::vector<double>> last_;  // last delivery time per channel: order is kept
  std::vector<bool> running_, creating_;
  std::map<int, bool> gone_, started_;
  std::map<int, std::vector<Ev>> waiting_;  // delivered before the rank began
  std::vector<double> create_by_;
  std::map<int, int> key_;
  std::map<int, Group> groups_;
  Outcome out_;
};

std::string fates(const Scenario& s) {
  const char* names[] = {"alive", "dead_before", "dies", "stops", "stopped_before"};
  std::string o;
  for (int r = 0; r < s.n; ++r) o += " " + std::to_string(r) + ":" + names[static_cast<int>(s.fate[r])] + "@" + std::to_string(s.at[r]);
  return o;
}

// One seeded run, checked. Returns the time every survivor was done.
double run_and_check(const Scenario& s, uint32_t seed) {
  Outcome o = Sim(s, seed).run();
  const std::string ctx = "seed " + std::to_string(seed) + ":" + fates(s) + " |" + o.log;
  std::vector<int> made;
  double last_done = 0;
  for (int r = 0; r < s.n; ++r) {
    if (s.fate[r] != Fate::alive) continue;
    // Every rank that stayed alive ends, in bounded time, inside the new communicator.
    EXPECT_EQ(o.state[r], State::created) << "rank " << r << " " << ctx;
    last_done = std::max(last_done, o.done_at[r]);
  }
  for (int r = 0; r < s.n; ++r)
    if (o.state[r] == State::created) made.push_back(r);
  for (int r : made) {
    EXPECT_EQ(o.members[r], o.members[made.front()]) << "ranks " << made.front() << " and " << r << " differ; " << ctx;
    for (int x = 0; x < s.n; ++x) {
      const bool in = std::binary_search(o.members[r].begin(), o.members[r].end(), x);
      if (s.fate[x] == Fate::alive) {
        EXPECT_TRUE(in) << "rank " << x << " left out; " << ctx;
      }
      if (s.fate[x] == Fate::dead_before || s.fate[x] == Fate::stopped_before) {
        EXPECT_FALSE(in) << "rank " << x << " kept; " << ctx;
      }
    }
  }
  return last_done;
}

Scenario random_scenario(std::mt19937& rng) {
  Scenario s;
  s.n = std::uniform_int_distribution<int>(2, 9)(rng);
  s.fate.assign(s.n, Fate::alive);
  s.at.assign(s.n, 0);
  std::uniform_real_distribution<double> u(0, 1);
  for (int r = 0; r < s.n; ++r) s.at[r] = u(rng) * 0.02;  // joins within 20 ms
  // Up to a third of the ranks fail, each in one of the ways; at least one stays alive.
  const int faults = std::uniform_int_distribution<int>(0, std::max(1, s.n / 3))(rng);
  for (int f = 0; f < faults; ++f) {
    const int r = std::uniform_int_distribution<int>(0, s.n - 1)(rng);
    const int how = std::uniform_int_distribution<int>(0, 3)(rng);
    s.fate[r] = how == 0 ? Fate::dead_before : how == 1 ? Fate::dies : how == 2 ? Fate::stops : Fate::stopped_before;
    s.at[r] = u(rng) * 0.06;  // during the agreement, or while the others connect
  }
  if (std::count(s.fate.begin(), s.fate.end(), Fate::alive) == 0) s.fate[0] = Fate::alive;
  return s;
}

TEST(ShrinkAgreement, SurvivorsAgreeWhateverDiesOrStopsWhen) {
  std::mt19937 rng(20);
  double worst = 0;
  int runs = 0;
  for (uint32_t seed = 1; seed <= 4000; ++seed) {
    Scenario s = random_scenario(rng);
    const double done = run_and_check(s, seed);
    // Each failure costs at most a timeout to notice (a stopped coordinator: a timeout and
    // its slack), and one more when it happened while the others connected.
    const auto failures = s.n - std::count(s.fate.begin(), s.fate.end(), Fate::alive);
    EXPECT_LT(done, (failures + 1) * (2 * kTimeout + 1)) << "seed " << seed << ":" << fates(s);
    worst = std::max(worst, done);
    ++runs;
    if (HasFailure()) break;
  }
  std::cout << runs << " runs; the slowest survivor was done " << worst << " s after the first join (STRATA_TIMEOUT "
            << kTimeout << " s)\n";
}

TEST(ShrinkAgreement, OneDeadRankIsLeftOutAtOnce) {
  // The common case: one rank killed before the shrink. No timeout is waited for.
  Scenario s{4, {Fate::alive, Fate::alive, Fate::dead_before, Fate::alive}, {0, 0.001, 0, 0.002}};
  for (uint32_t seed = 1; seed <= 50; ++seed) EXPECT_LT(run_and_check(s, seed), 0.1) << "seed " << seed;
}

TEST(ShrinkAgreement, TheCoordinatorDyingMidDecisionIsSurvived) {
  // Rank 0 coordinates and dies as its decision goes out: relays or its successor finish.
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    Scenario s{5, {Fate::dies, Fate::alive, Fate::alive, Fate::alive, Fate::alive}, {0, 0, 0, 0, 0}};
    for (int r = 1; r < 5; ++r) s.at[r] = std::uniform_real_distribution<double>(0, 0.003)(rng);
    s.at[0] = std::uniform_real_distribution<double>(0.004, 0.012)(rng);
    run_and_check(s, seed);
    if (HasFailure()) break;
  }
}

TEST(ShrinkAgreement, AStoppedRankIsLeftOutAfterTheTimeout) {
  Scenario s{3, {Fate::alive, Fate::stopped_before, Fate::alive}, {0, 0, 0.001}};
  const double done = run_and_check(s, 7);
  EXPECT_GE(done, kTimeout);
  EXPECT_LT(done, kTimeout + 0.1);
}

}  // namespace

namespace strata {
namespace {

// Left out by the others while its own connecting was under way, a rank stays out when
// that connecting fails: another epoch alone would end in a communicator of itself.
TEST(ShrinkAgreement, ALeftOutRankStaysOutWhenItsConnectingFails) {
  ShrinkAgreement a(1, 3, 1.0);
  a.begin(0, 1000, -1, {});
  a.notice(0, shrink_notice('D', 0, 1), 0.1);
  ASSERT_EQ(a.state(), ShrinkAgreement::State::excluded);
  a.retry(0.2, 1001);
  EXPECT_EQ(a.state(), ShrinkAgreement::State::excluded);
  EXPECT_EQ(a.excluded_by(), 0);
}

}  // namespace
}  // namespace strata
