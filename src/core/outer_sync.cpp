// The outer synchronisation (include/strata/outer_sync.hpp): a composition of collectives
// over two communicators split from the caller's, the island (ranks holding one replica)
// and the crossing (rank i of every island), run on a thread of the object's own.
// Who owns what and when is algorithms/outer_layout; the wire formats are ground/wire_codec.
#include "strata/outer_sync.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>

#include "algorithms/outer_layout.hpp"
#include "core/comm_state.hpp"
#include "core/op_queue.hpp"
#include "ground/fnv1a.hpp"
#include "ground/log.hpp"
#include "ground/wire_codec.hpp"

namespace strata {

namespace {

// What every rank must agree on, exchanged once at creation.
struct Fingerprint {
  uint64_t count, segments, params;
  float lr, momentum, mix;
  int32_t nesterov, format, islands, every, fragments, overlap;
  int32_t valid;  // this rank's own arguments passed the local checks
};

std::string local_problem(const float* params, const OuterSyncConfig& c) {
  auto bad = [](const std::string& s) { return "outer sync: " + s; };
  if (!params) return bad("params is null");
  if (!(std::isfinite(c.lr) && c.lr >= 0)) return bad("lr must be a finite number >= 0");
  if (!(std::isfinite(c.momentum) && c.momentum >= 0)) return bad("momentum must be a finite number >= 0");
  if (!is_valid(c.format)) return bad("unknown wire format " + std::to_string(static_cast<int>(c.format)));
  if (c.islands < 0) return bad("islands must be >= 0 (0: the hierarchy's outermost level)");
  if (c.every < 1) return bad("every (H) must be at least 1");
  if (c.fragments < 1 || c.fragments > c.every)
    return bad("fragments must be from 1 to every (H = " + std::to_string(c.every) + "): one fragment starts per step at most");
  if (c.overlap < 0 || c.overlap >= c.every)
    return bad("overlap (tau) must be from 0 to every - 1 = " + std::to_string(c.every - 1) +
               ": a fragment is applied before its next exchange");
  if (!(c.mix >= 0 && c.mix <= 1)) return bad("mix (alpha) must be in [0, 1]");
  return {};
}

std::string differs(const Fingerprint& a, const Fingerprint& b) {
  if (a.count != b.count) return "the parameter count (" + std::to_string(b.count) + " vs " + std::to_string(a.count) + ")";
  if (a.segments != b.segments) return "the segments";
  if (std::memcmp(&a.lr, &b.lr, 4) || std::memcmp(&a.momentum, &b.momentum, 4) || a.nesterov != b.nesterov)
    return "the outer optimizer (lr, momentum, nesterov)";
  if (a.format != b.format) return "the wire format";
  if (a.islands != b.islands) return "islands";
  if (a.every != b.every || a.fragments != b.fragments || a.overlap != b.overlap || std::memcmp(&a.mix, &b.mix, 4))
    return "the schedule (every, fragments, overlap, mix)";
  if (a.params != b.params) return "the initial parameters (replicas must start equal)";
  return {};
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct OuterSync::Impl {
  OuterSyncConfig cfg;
  Islands isl;
  int rank = 0, me_island = 0, me_local = 0;
  Comm island, across;  // across: rank i of every island, ranked by island
  float* params = nullptr;
  size_t count = 0;
  OuterLayout lay;
  std::vector<float> snapshot;  // θ_old, packed order
  std::vector<float> momentum;  // this rank's shares; -0.0 until set, so the first update is `buf = g` exactly
  std::vector<float> delta;     // this rank's shares: Δ, then the decoded average
  std::vector<Request> inflight;   // per fragment
  std::vector<long long> apply_at; // per fragment; -1: nothing pending
  long long t = 0;
  double exposed = 0;
  std::atomic<uint64_t> exchanges{0}, bytes{0};
  // Scratch of the exchange thread.
  std::vector<uint8_t> sent, got;
  std::vector<float> acc, piece;
  OpQueue worker;  // last: stopped first, while everything it uses still exists

  ~Impl() { worker.stop(); }

  const Fragment& frag(size_t p) const { return lay.fragments[p]; }
  float* my_snapshot_share(size_t p) { return snapshot.data() + frag(p).packed + me_local * frag(p).share; }

  void start(size_t p);
  void exchange(size_t p);  // on the worker thread
  // Runs a collective of the island or the crossing; a failure names the job's rank.
  template <class Call>
  void on(bool crossing, const Call& call);
  void outer_step(float* theta, float* buf, const float* g, size_t n) const;
  // Waits for fragment p's exchange; `count`: the training loop's wait (step(), sync(),
  // finish()), counted in stats, not a checkpoint's or an evaluation's.
  void wait(size_t p, bool count = true);
  void wait_all(bool count);
  void apply(size_t p);
  void unpack(const float* packed, float* out) const;  // fragment by fragment, packed -> buffer order
};

// Δ of this rank's share, then the exchange in the background.
void OuterSync::Impl::start(size_t p) {
  const Fragment& f = frag(p);
  float* d = delta.data() + f.share_at;
  const float* snap = snapshot.data() + f.packed;
  const size_t lo = me_local * f.share;
  std::fill(d, d + f.share, 0.0f);
  for_each_run(f, lo, lo + f.share, [&](size_t b, size_t q, size_t len) {
    for (size_t i = 0; i < len; ++i) d[q - lo + i] = snap[q + i] - params[b + i];
  });
  if (f.padded == 0) {  // none of its segments on this communicator's ranks: nothing to exchange
    ++exchanges;
    return;
  }
  inflight[p] = worker.submit([this, p] { exchange(p); });
}

void OuterSync::Impl::exchange(size_t p) {
  log::set_thread_rank(rank);
  const Fragment& f = frag(p);
  const size_t K = static_cast<size_t>(isl.count), n = f.share / K, E = wire_bytes(cfg.format, n);
  const size_t mine = static_cast<size_t>(me_island);
  float* d = delta.data() + f.share_at;
  sent.resize(K * E);
  got.resize(K * E);
  acc.resize(n);
  piece.resize(n);
  // Reduce-scatter across islands: piece k of every island's share goes to island k.
  wire_encode(cfg.format, d, f.share, sent.data());
  if (K > 1) on(true, [&] { across.all_to_all(sent.data(), got.data(), E, DataType::uint8); });
  else got = sent;
  // The owner sums the decoded pieces in fp32, in island order, and encodes the mean once.
  wire_decode(cfg.format, got.data(), n, acc.data());
  for (size_t k = 1; k < K; ++k) {
    wire_decode(cfg.format, got.data() + k * E, n, piece.data());
    for (size_t i = 0; i < n; ++i) acc[i] += piece[i];
  }
  if (K > 1)
    for (size_t i = 0; i < n; ++i) acc[i] /= static_cast<float>(K);
  wire_encode(cfg.format, acc.data(), n, sent.data() + mine * E);
  // All-gather of the encoded means: every island decodes the same bytes.
  if (K > 1) on(true, [&] { across.all_gather(sent.data() + mine * E, sent.data(), E, DataType::uint8); });
  wire_decode(cfg.format, sent.data(), f.share, d);
  outer_step(my_snapshot_share(p), momentum.data() + f.share_at, d, f.share);
  if (isl.size > 1)
    on(false, [&] { island.all_gather(my_snapshot_share(p), snapshot.data() + f.packed, f.share, DataType::float32); });
  const uint64_t wire = 2 * (K - 1) * E;
  bytes += wire;
  ++exchanges;
  STRATA_INFO("outer sync: fragment %zu exchanged (%s, share %zu of %zu elements): %llu bytes sent across islands",
              p, name(cfg.format), f.share, f.padded, static_cast<unsigned long long>(wire));
}

template <class Call>
void OuterSync::Impl::on(bool crossing, const Call& call) {
  try {
    call();
  } catch (const PeerError& e) {
    int job = -1;  // the peer's rank in the caller's communicator
    for (size_t r = 0; r < isl.island.size(); ++r)
      if (crossing ? isl.local[r] == me_local && isl.island[r] == e.peer()
                   : isl.island[r] == me_island && isl.local[r] == e.peer())
        job = static_cast<int>(r);
    const std::string msg = std::string("outer sync, ") + (crossing ? "across islands" : "inside the island") +
                            ": job rank " + std::to_string(job) + " failed (" + e.what() + ")";
    if (e.kind() == ErrorKind::timeout) throw TimeoutError(job, msg);
    throw PeerError(job, msg);
  }
}

// torch.optim.SGD(lr, momentum, dampening=0, nesterov) on Δ, in its order of operations:
// buf = buf*μ + g; d = g + μ*buf (Nesterov) or buf; θ = θ + (-lr)*d. PyTorch's CPU kernels
// compute `x.add(y, alpha=a)` as one fused multiply-add where the CPU has one, and so do
// we: the results are then PyTorch's to the bit (tests/outer_sync compares).
void OuterSync::Impl::outer_step(float* theta, float* buf, const float* g, size_t n) const {
  const float lr = cfg.lr, mu = cfg.momentum;
  for (size_t i = 0; i < n; ++i) {
    float d = g[i];
    if (mu != 0) {
      buf[i] = buf[i] * mu + g[i];
      d = cfg.nesterov ? std::fma(mu, buf[i], g[i]) : buf[i];
    }
    theta[i] = std::fma(-lr, d, theta[i]);
  }
}

void OuterSync::Impl::wait(size_t p, bool count) {
  if (!inflight[p].valid()) return;
  const double t0 = now_s();
  Request r = std::move(inflight[p]);
  inflight[p] = Request();
  r.wait();
  if (count) exposed += now_s() - t0;
}

void OuterSync::Impl::wait_all(bool count) {
  for (size_t p = 0; p < inflight.size(); ++p) wait(p, count);
}

// θ ← (1 − α)·θ_global + α·θ_local on the fragment's elements.
void OuterSync::Impl::apply(size_t p) {
  wait(p);
  const Fragment& f = frag(p);
  const float* g = snapshot.data() + f.packed;
  const float a = cfg.mix;
  for_each_run(f, 0, f.padded, [&](size_t b, size_t q, size_t len) {
    float* th = params + b;
    if (a == 0) {
      std::memcpy(th, g + q, len * sizeof(float));
      return;
    }
    for (size_t i = 0; i < len; ++i) th[i] = (1 - a) * g[q + i] + a * th[i];
  });
  apply_at[p] = -1;
}

void OuterSync::Impl::unpack(const float* packed, float* out) const {
  for (const Fragment& f : lay.fragments)
    for_each_run(f, 0, f.padded, [&](size_t b, size_t q, size_t len) {
      std::memcpy(out + b, packed + f.packed + q, len * sizeof(float));
    });
}

// ---- the handle ----

OuterSync::OuterSync(Comm comm, float* params, size_t count, const OuterSyncConfig& cfg,
                     std::vector<size_t> segments) {
  const CommState& s = CommState::of(comm);
  // Local checks first, but every rank still joins the exchange below, so that a rank with
  // bad arguments does not leave the others waiting for it.
  std::string problem = local_problem(params, cfg);
  OuterLayout lay;
  Islands isl;
  if (problem.empty()) {
    try {
      isl = find_islands(s.hier, cfg.islands);
      lay = outer_layout(count, segments, cfg.fragments, isl.count, isl.size, cfg.every);
    } catch (const InvalidArgument& e) {
      problem = e.what();
    }
  }
  Fingerprint mine{count, fnv1a(segments.data(), segments.size() * sizeof(size_t)),
                   params ? fnv1a(params, count * sizeof(float)) : 0, cfg.lr, cfg.momentum, cfg.mix,
                   cfg.nesterov, static_cast<int32_t>(cfg.format), cfg.islands, cfg.every, cfg.fragments,
                   cfg.overlap, problem.empty()};
  std::vector<Fingerprint> all(static_cast<size_t>(s.nranks));
  comm.all_gather(&mine, all.data(), sizeof mine, DataType::uint8);
  if (!problem.empty()) throw InvalidArgument(problem);
  for (int r = 0; r < s.nranks; ++r) {
    if (!all[r].valid) throw InvalidArgument("outer sync: rank " + std::to_string(r) + " passed invalid arguments");
    std::string d = differs(all[0], all[r]);
    if (!d.empty()) throw InvalidArgument("outer sync: rank " + std::to_string(r) + " differs from rank 0 in " + d);
  }

  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.cfg = cfg;
  m.isl = isl;
  m.rank = s.rank;
  m.me_island = isl.island[s.rank];
  m.me_local = isl.local[s.rank];
  m.params = params;
  m.count = count;
  m.lay = std::move(lay);
  m.island = comm.split(m.me_island, s.rank);
  m.across = comm.split(m.me_local, m.me_island);
  m.snapshot.assign(m.lay.packed_size, 0.0f);
  for (const Fragment& f : m.lay.fragments)
    for_each_run(f, 0, f.padded, [&](size_t b, size_t q, size_t len) {
      std::memcpy(m.snapshot.data() + f.packed + q, params + b, len * sizeof(float));
    });
  m.momentum.assign(m.lay.share_size, -0.0f);
  m.delta.assign(m.lay.share_size, 0.0f);
  m.inflight.resize(m.lay.fragments.size());
  m.apply_at.assign(m.lay.fragments.size(), -1);
  impl_ = std::move(impl);
  if (s.rank == 0)
    STRATA_INFO("outer sync: %d islands of %d ranks, %zu parameters in %d fragments (%zu packed), %s on the wire: "
                "%llu bytes per rank per full sync; lr %g momentum %g%s, every %d, overlap %d, mix %g",
                isl.count, isl.size, count, cfg.fragments, m.lay.packed_size, name(cfg.format),
                static_cast<unsigned long long>(bytes_per_sync()), cfg.lr, cfg.momentum,
                cfg.nesterov ? " (Nesterov)" : "", cfg.every, cfg.overlap, cfg.mix);
}

OuterSync::OuterSync() = default;
OuterSync::~OuterSync() = default;
OuterSync::OuterSync(OuterSync&&) noexcept = default;
OuterSync& OuterSync::operator=(OuterSync&&) noexcept = default;

void OuterSync::abort() {
  if (!impl_) return;
  // The worker's exchange fails promptly once its communicators are gone; ~Impl joins it.
  for (Comm* c : {&impl_->island, &impl_->across})
    if (c->valid()) c->abort();
  impl_.reset();
}

OuterSync::Impl& OuterSync::checked() const {
  if (!impl_) throw InvalidUsage("this OuterSync is empty (default-constructed or moved from)");
  return *impl_;
}

void OuterSync::step() {
  Impl& m = checked();
  ++m.t;
  for (size_t p = 0; p < m.lay.fragments.size(); ++p)
    if (m.apply_at[p] == m.t) m.apply(p);
  std::vector<size_t> due;
  for (size_t p = 0; p < m.lay.fragments.size(); ++p)
    if (exchanged_at(m.frag(p), m.t, m.cfg.every)) due.push_back(p);
  for (size_t p : due) {
    m.start(p);
    m.apply_at[p] = m.t + m.cfg.overlap;
  }
  if (m.cfg.overlap == 0)
    for (size_t p : due) m.apply(p);
}

void OuterSync::sync() {
  Impl& m = checked();
  finish();
  for (size_t p = 0; p < m.lay.fragments.size(); ++p) m.start(p);
  for (size_t p = 0; p < m.lay.fragments.size(); ++p) m.apply(p);
}

void OuterSync::finish() {
  Impl& m = checked();
  for (size_t p = 0; p < m.lay.fragments.size(); ++p)
    if (m.apply_at[p] >= 0 || m.inflight[p].valid()) m.apply(p);
}

bool OuterSync::next_step_touches_params() const {
  const Impl& m = checked();
  const long long t = m.t + 1;
  for (size_t p = 0; p < m.lay.fragments.size(); ++p)
    if (m.apply_at[p] == t || exchanged_at(m.frag(p), t, m.cfg.every)) return true;
  return false;
}

long long OuterSync::steps() const { return checked().t; }
int OuterSync::islands() const { return checked().isl.count; }
int OuterSync::island() const { return checked().me_island; }
int OuterSync::island_size() const { return checked().isl.size; }

OuterSyncStats OuterSync::stats() const {
  const Impl& m = checked();
  return {m.exchanges.load(), m.bytes.load(), m.exposed};
}

uint64_t OuterSync::bytes_per_sync() const {
  const Impl& m = checked();
  const size_t K = static_cast<size_t>(m.isl.count);
  uint64_t b = 0;
  for (const Fragment& f : m.lay.fragments) b += 2 * (K - 1) * wire_bytes(m.cfg.format, f.share / K);
  return b;
}

void OuterSync::save_state(float* snapshot, float* momentum) {
  Impl& m = checked();
  if (!snapshot || !momentum) throw InvalidArgument("outer sync: save_state needs two buffers of count floats");
  m.wait_all(false);
  m.unpack(m.snapshot.data(), snapshot);
  std::vector<float> gathered(m.lay.packed_size);
  for (const Fragment& f : m.lay.fragments) {
    const float* mine = m.momentum.data() + f.share_at;
    if (m.isl.size > 1)
      m.on(false, [&] { m.island.all_gather(mine, gathered.data() + f.packed, f.share, DataType::float32); });
    else
      std::memcpy(gathered.data() + f.packed, mine, f.share * sizeof(float));
  }
  m.unpack(gathered.data(), momentum);
}

void OuterSync::load_state(const float* snapshot, const float* momentum, long long steps) {
  Impl& m = checked();
  if (!snapshot || !momentum) throw InvalidArgument("outer sync: load_state needs two buffers of count floats");
  if (steps < 0) throw InvalidArgument("outer sync: load_state with a negative step count");
  m.wait_all(false);
  std::fill(m.momentum.begin(), m.momentum.end(), -0.0f);
  for (size_t p = 0; p < m.lay.fragments.size(); ++p) {
    const Fragment& f = m.frag(p);
    const size_t lo = m.me_local * f.share;
    for_each_run(f, 0, f.padded, [&](size_t b, size_t q, size_t len) {
      std::memcpy(m.snapshot.data() + f.packed + q, snapshot + b, len * sizeof(float));
    });
    for_each_run(f, lo, lo + f.share, [&](size_t b, size_t q, size_t len) {
      std::memcpy(m.momentum.data() + f.share_at + (q - lo), momentum + b, len * sizeof(float));
    });
    // An exchange that started less than τ steps before `steps` has completed (the saved
    // snapshot holds its result); its application is still due.
    const long long last = last_exchange(f, steps, m.cfg.every);
    m.apply_at[p] = last >= 0 && last + m.cfg.overlap > steps ? last + m.cfg.overlap : -1;
  }
  m.t = steps;
}

void OuterSync::global_params(float* out) {
  Impl& m = checked();
  if (!out) throw InvalidArgument("outer sync: global_params needs a buffer of count floats");
  m.wait_all(false);
  m.unpack(m.snapshot.data(), out);
}

}  // namespace strata
