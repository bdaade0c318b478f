#include "replay.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

namespace strata::sim {

namespace {

// A queue that reuses its storage: most hold a message or two at a time, and there is one
// per direction (hundreds of thousands at 16,384 ranks), so no std::deque blocks.
template <class T>
struct Fifo {
  std::vector<T> items;
  size_t head = 0;
  bool empty() const { return head == items.size(); }
  size_t size() const { return items.size() - head; }
  const T& front() const { return items[head]; }
  void push(const T& x) {
    if (empty()) items.clear(), head = 0;
    items.push_back(x);
  }
  T pop() {
    T x = items[head++];
    if (empty()) items.clear(), head = 0;
    return x;
  }
};

// Events closer than this are taken together (one recomputation of the network for a
// round of equal flows whose times differ by rounding).
constexpr double kSameTime = 1e-10;

class Replay {
 public:
  Replay(const Fabric& f, const PlanSet& p, const ReplayOptions& o)
      : fabric_(f), plans_(p), opt_(o), net_(f.links()), dirs_(p.dirs.size()), ranks_(static_cast<size_t>(p.nranks())) {}

  ReplayResult run();

 private:
  struct Send {
    uint64_t bytes;
    int32_t gate;       // a forward: the direction whose receive it waits for, else -1
    uint64_t gate_seq;  // ... and that receive's number
  };
  // One direction between two ranks: a byte stream carrying one message at a time. A
  // message goes as one flow, or several where a send completes part way through it.
  struct Dir {
    Fifo<Send> queue;          // posted, waiting for their turn
    Fifo<uint64_t> flying;     // sent, not arrived yet (bytes)
    Fifo<uint64_t> arrived;    // arrived before their receive was posted
    Fifo<uint64_t> waiting;    // receives posted before their message arrived
    Fifo<uint64_t> completes;  // posted sends not complete yet: the stream's bytes sent when they are
    uint64_t started = 0, recvs_posted = 0, recvs_done = 0;
    uint64_t posted = 0, sent = 0;  // the stream's bytes: posted, and gone onto the wire
    uint64_t head = 0, head_left = 0, segment = 0;  // the message on the wire: size, left, this flow
    bool busy = false;
  };
  struct Rank {
    uint64_t round = 0;  // index into plans_.rounds
    int iter = 0;
    int pending = 0;
    double start = 0, end = 0;
  };
  // kPost: a rank's local work is done, its transfers go; kArrive: a message's last byte
  // arrives; kRelease: a rank is done posting its round's sends.
  enum EventKind : uint8_t { kPost, kArrive, kRelease };
  struct Event {
    double time;
    uint32_t id;
    EventKind kind;
    bool operator>(const Event& o) const { return time > o.time; }
  };

  void advance(int r, double now);
  bool post(int r, double now);
  void complete(int r, double now);
  void try_start(uint32_t d, double now);
  void transmitted(uint32_t d, double now);
  void arrive(uint32_t d, double now);
  void recv_done(uint32_t d, double now);
  void match(uint32_t d, uint64_t sent, uint64_t received);
  void drain_ready();
  [[noreturn]] void stuck() const;

  const Fabric& fabric_;
  const PlanSet& plans_;
  ReplayOptions opt_;
  FlowNetwork net_;
  std::vector<Dir> dirs_;
  std::vector<Rank> ranks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<std::pair<int, double>> ready_;  // ranks whose round completed, and when
  int parked_ = 0, finished_ = 0;
  size_t messages_ = 0;
};

void Replay::advance(int r, double now) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  for (;;) {
    if (k.round == plans_.rank_first[r + 1]) {  // a call is done
      ++k.iter;
      if (k.iter == opt_.warmup + opt_.iters) {
        k.end = now;
        ++finished_;
        return;
      }
      k.round = plans_.rank_first[r];
      if (k.iter == opt_.warmup) {  // the barrier before the timed calls
        k.start = now;
        if (++parked_ < plans_.nranks()) return;
        for (int q = 0; q < plans_.nranks(); ++q) {  // the last to arrive releases everyone
          ranks_[q].start = now;
          if (q != r && plans_.rounds_of(q) > 0) advance(q, now);
        }
      }
    }
    const double local = plans_.rounds[k.round].local_s;
    if (local > 0) {
      events_.push({now + local, static_cast<uint32_t>(r), kPost});
      return;
    }
    if (!post(r, now)) return;
    ++k.round;
  }
}

// Posts the current round's transfers; true when the round is already complete.
bool Replay::post(int r, double now) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  const PlanSet::Round& round = plans_.rounds[k.round];
  const uint64_t end = plans_.rounds[k.round + 1].first;
  k.pending = 1;  // held until every transfer is posted: one may complete at once
  uint32_t last_recv = 0;
  // The rank posts the round's sends one after another, each taking its overhead: the round
  // lasts at least that long. (Their flows start together, so that a round of thousands of
  // equal flows stays one change of the network's rates.)
  double posting = 0;
  for (uint64_t i = round.first; i < end; ++i) {
    const PlanSet::Xfer& x = plans_.xfers[i];
    Dir& d = dirs_[x.dir];
    ++k.pending;
    if (x.kind == PlanSet::recv) {
      last_recv = x.dir;
      ++d.recvs_posted;
      if (!d.arrived.empty()) {
        match(x.dir, d.arrived.pop(), x.bytes);
        recv_done(x.dir, now);
      } else {
        d.waiting.push(x.bytes);
      }
    } else {
      // A forward waits for the receive just posted on the reverse direction, and completes
      // only once sent (its data does not exist before); a send completes once no more
      // than the direction's buffer of it is left to send.
      const bool fwd = x.kind == PlanSet::forward;
      const PlanSet::Dir& pd = plans_.dirs[x.dir];
      posting += fabric_.overhead(pd.from, pd.to_real);
      d.queue.push({x.bytes, fwd ? static_cast<int32_t>(last_recv) : -1, fwd ? dirs_[last_recv].recvs_posted - 1 : 0});
      d.posted += x.bytes;
      const uint64_t held = fwd ? 0 : static_cast<uint64_t>(fabric_.buffer(pd.from, pd.to_real));
      const uint64_t done_at = d.posted > held ? d.posted - held : 0;
      if (done_at <= d.sent) --k.pending;
      else d.completes.push(done_at);
    }
    try_start(x.dir, now);
  }
  if (posting > 0) {  // the hold lasts until the last send is posted
    events_.push({now + posting, static_cast<uint32_t>(r), kRelease});
    return false;
  }
  return --k.pending == 0;  // the hold
}

void Replay::complete(int r, double now) {
  if (--ranks_[static_cast<size_t>(r)].pending == 0) ready_.push_back({r, now});
}

void Replay::drain_ready() {
  while (!ready_.empty()) {
    auto [r, now] = ready_.back();
    ready_.pop_back();
    ++ranks_[static_cast<size_t>(r)].round;
    advance(r, now);
  }
}

void Replay::try_start(uint32_t di, double now) {
  Dir& d = dirs_[di];
  if (d.busy) return;
  if (d.head_left == 0) {  // the next message, if it may go
    if (d.queue.empty()) return;
    const Send& s = d.queue.front();
    if (s.gate >= 0 && dirs_[static_cast<size_t>(s.gate)].recvs_done <= s.gate_seq) return;
    if (s.bytes > fabric_.cluster().eager_bytes && d.recvs_posted <= d.started) return;  // waits for its receive
    d.head = d.head_left = d.queue.pop().bytes;
    ++d.started;
    ++messages_;
  }
  // Up to where the next posted send completes, or the message's end.
  d.segment = d.head_left;
  if (!d.completes.empty()) d.segment = std::min(d.segment, d.completes.front() - d.sent);
  d.busy = true;
  const PlanSet::Dir& pd = plans_.dirs[di];
  uint32_t path[FlowNetwork::kMaxPath];
  const int n = fabric_.route(pd.from, pd.to_real, path);
  net_.add(path, n, static_cast<double>(d.segment), now, di);
}

void Replay::transmitted(uint32_t di, double now) {
  Dir& d = dirs_[di];
  d.busy = false;
  d.sent += d.segment;
  d.head_left -= d.segment;
  const PlanSet::Dir& pd = plans_.dirs[di];
  while (!d.completes.empty() && d.completes.front() <= d.sent) {
    d.completes.pop();
    complete(pd.from, now);  // a send
  }
  if (d.head_left == 0) {
    d.flying.push(d.head);
    const double latency = fabric_.latency(pd.from, pd.to_real);
    if (latency > 0) events_.push({now + latency, di, kArrive});
    else arrive(di, now);
  }
  try_start(di, now);
}

void Replay::arrive(uint32_t di, double now) {
  Dir& d = dirs_[di];
  const uint64_t bytes = d.flying.pop();
  if (d.waiting.empty()) {
    d.arrived.push(bytes);
    return;
  }
  match(di, bytes, d.waiting.pop());
  recv_done(di, now);
}

void Replay::recv_done(uint32_t di, double now) {
  Dir& d = dirs_[di];
  ++d.recvs_done;
  const PlanSet::Dir& pd = plans_.dirs[di];
  complete(pd.to, now);
  if (pd.reverse >= 0) try_start(static_cast<uint32_t>(pd.reverse), now);  // a forward waiting for it
}

void Replay::match(uint32_t di, uint64_t sent, uint64_t received) {
  if (sent == received) return;
  const PlanSet::Dir& pd = plans_.dirs[di];
  throw PlanError("rank " + std::to_string(pd.from) + " sends " + std::to_string(sent) + " bytes to rank " +
                  std::to_string(pd.to_real) + ", which receives " + std::to_string(received) + " bytes in that place");
}

void Replay::stuck() const {
  for (int r = 0; r < plans_.nranks(); ++r) {
    const Rank& k = ranks_[static_cast<size_t>(r)];
    if (k.iter >= opt_.warmup + opt_.iters) continue;
    std::string why;
    for (uint64_t i = plans_.rounds[k.round].first; i < plans_.rounds[k.round + 1].first && why.size() < 200; ++i) {
      const PlanSet::Xfer& x = plans_.xfers[i];
      const PlanSet::Dir& pd = plans_.dirs[x.dir];
      const Dir& d = dirs_[x.dir];
      if (x.kind == PlanSet::recv && !d.waiting.empty()) why += "; a receive from rank " + std::to_string(pd.from) + " never came";
      if (x.kind != PlanSet::recv && (!d.queue.empty() || !d.arrived.empty()))
        why += "; rank " + std::to_string(pd.to_real) + " never received its send";
    }
    throw PlanError("the plans deadlock: rank " + std::to_string(r) + " waits in round " +
                    std::to_string(k.round - plans_.rank_first[r]) + " of " + std::to_string(plans_.rounds_of(r)) +
                    " (call " + std::to_string(k.iter + 1) + ")" + why);
  }
  throw PlanError("the plans deadlock");
}

ReplayResult Replay::run() {
  const int n = plans_.nranks();
  for (int r = 0; r < n; ++r) ranks_[static_cast<size_t>(r)].round = plans_.rank_first[r];
  if (opt_.warmup == 0) parked_ = n;
  for (int r = 0; r < n; ++r) {
    // A rank with an empty plan would finish every call at once; advance() counts calls
    // by reaching the end of the plan, which for it is its start.
    if (plans_.rounds_of(r) == 0) {
      ranks_[static_cast<size_t>(r)].iter = opt_.warmup + opt_.iters;
      ++finished_;
      if (opt_.warmup) ++parked_;  // at the barrier from the start
      continue;
    }
    advance(r, 0);
  }
  drain_ready();
  std::vector<FlowNetwork::Tag> done;
  double now = 0;
  for (;;) {
    const double t_net = net_.next_time(now);
    const double t_ev = events_.empty() ? HUGE_VAL : events_.top().time;
    const double t = std::min(t_net, t_ev);
    if (t == HUGE_VAL) break;
    now = t;
    done.clear();
    net_.complete_until(t + kSameTime, done);
    for (FlowNetwork::Tag d : done) transmitted(d, t);
    while (!events_.empty() && events_.top().time <= t + kSameTime) {
      const Event e = events_.top();
      events_.pop();
      if (e.kind == kArrive) {
        arrive(e.id, e.time);
      } else if (e.kind == kRelease) {
        complete(static_cast<int>(e.id), e.time);
      } else if (post(static_cast<int>(e.id), e.time)) {
        ready_.push_back({static_cast<int>(e.id), e.time});
      }
    }
    drain_ready();
  }
  if (finished_ < n) stuck();
  for (uint32_t i = 0; i < dirs_.size(); ++i)
    if (!dirs_[i].queue.empty() || !dirs_[i].arrived.empty())
      throw PlanError("rank " + std::to_string(plans_.dirs[i].from) + " sends rank " + std::to_string(plans_.dirs[i].to_real) +
                      " more messages than it receives");

  ReplayResult res;
  for (const Rank& k : ranks_) {
    const double t = (k.end - k.start) / opt_.iters;
    res.time_s += t / n;
    res.slowest_s = std::max(res.slowest_s, t);
  }
  // Folded, every held rank and link stands for fold() of them.
  res.messages = messages_ * static_cast<size_t>(fabric_.fold());
  res.reallocations = net_.reallocations();
  const Cluster& c = fabric_.cluster();
  const double calls = opt_.warmup + opt_.iters;
  for (const LevelDesc& l : c.levels) res.levels.push_back({l.name});
  const auto& spec = net_.links();
  const auto& use = net_.use();
  for (size_t i = 0; i < spec.size(); ++i) {
    LevelUse& u = res.levels[static_cast<size_t>(spec[i].level)];
    u.links += static_cast<size_t>(fabric_.fold());
    const double bytes = use[i].bytes / calls;
    if (bytes > 0) u.links_used += static_cast<size_t>(fabric_.fold()), u.bytes_mean += bytes * fabric_.fold();
    u.bytes_max = std::max(u.bytes_max, bytes);
    if (use[i].peak_used_Bps > u.peak_Bps) {
      u.peak_Bps = use[i].peak_used_Bps;
      u.peak_capacity_Bps = spec[i].rate_Bps;
      u.peak_time_s = use[i].peak_time_s;
      u.peak_flows = use[i].peak_flows;
    }
  }
  for (LevelUse& u : res.levels)
    if (u.links_used) u.bytes_mean /= static_cast<double>(u.links_used);
  return res;
}

}  // namespace

ReplayResult replay(const Fabric& fabric, const PlanSet& plans, const ReplayOptions& o) {
  if (o.iters < 1 || o.warmup < 0) throw std::invalid_argument("replay: iters >= 1 and warmup >= 0");
  if (fabric.period() != plans.nranks())
    throw std::logic_error("replay: plans of " + std::to_string(plans.nranks()) + " ranks over a fabric folded by " +
                           std::to_string(fabric.period()));
  return Replay(fabric, plans, o).run();
}

}  // namespace strata::sim
