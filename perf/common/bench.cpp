#include "bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "reference.hpp"
#include "sweep.hpp"

namespace perf {

namespace {

using Clock = std::chrono::steady_clock;

struct Context {
  Backend& b;
  const Options& o;
  std::ostream& out;
  BenchBuffer& send;
  BenchBuffer& recv;
  uint64_t max_bytes;
  uint32_t check_rep = 0;  // seed for successive validation runs
  int local_errors = 0;
  double busbw_sum = 0;
  int busbw_count = 0;
  bool printer() const { return b.rank() == 0; }
};

struct Case {
  Coll coll;
  DataType type;
  ReduceOp op;
  int root;
};

// `count`: the call's count (call_count).
CheckSpec spec_for(const Context& cx, const Case& c, size_t count, bool in_place) {
  CheckSpec s;
  s.coll = c.coll;
  s.type = c.type;
  s.op = c.op;
  s.root = c.root;
  s.rank = cx.b.rank();
  s.nranks = cx.b.size();
  s.count = count;
  s.in_place = in_place;
  return s;
}

// One operation; `iter` selects the buffer offset (0 for untimed and check runs).
void start(Context& cx, const CheckSpec& s, int iter) {
  const size_t total = row_bytes(s.coll, s.count, s.nranks, size_of(s.type));
  const size_t steps = total ? static_cast<size_t>(cx.max_bytes / total) : 1;
  const size_t shift = steps ? total * (static_cast<size_t>(iter) % steps) : 0;
  const CallBuffers p = call_buffers(s, cx.send.call_data() + shift, cx.recv.call_data() + shift);
  CollCall call;
  call.coll = s.coll;
  call.send = p.send;
  call.recv = p.recv;
  call.count = s.count;
  call.type = s.type;
  call.op = s.op;
  call.root = s.root;
  call.in_place = s.in_place;
  cx.b.run(call);
  if (cx.o.blocking) cx.b.barrier();
}

double combine_time(Context& cx, double seconds) {
  switch (cx.o.average) {
    case Average::rank0: return seconds;  // only rank 0 prints its own
    case Average::avg: return cx.b.all_reduce(seconds, ScalarOp::sum) / cx.b.size();
    case Average::min: return cx.b.all_reduce(seconds, ScalarOp::min);
    case Average::max: return cx.b.all_reduce(seconds, ScalarOp::max);
  }
  return seconds;
}

// This rank's inputs where the call reads them (copied in where calls take other memory).
void prepare(Context& cx, const CheckSpec& s) {
  prepare_input(s, cx.send.host_data(), cx.recv.host_data());
  cx.send.to_call(touched_bytes(s));
  cx.recv.to_call(touched_bytes(s));
}

SideResult bench_time(Context& cx, const Case& c, size_t count, bool in_place) {
  CheckSpec s = spec_for(cx, c, count, in_place);
  if (cx.o.check) prepare(cx, s);
  start(cx, s, 0);
  cx.b.barrier();

  const auto t0 = Clock::now();
  for (int iter = 0; iter < cx.o.iters; ++iter) start(cx, s, iter);
  const double local = std::chrono::duration<double>(Clock::now() - t0).count() / cx.o.iters;
  // With -z 1 each call's time includes a barrier; time as many bare barriers, so that the
  // difference is a call's latency, also for a rooted call whose non-roots would otherwise
  // run ahead of the root (back to back, its time per call is throughput).
  double barrier_local = 0;
  if (cx.o.blocking) {
    const auto b0 = Clock::now();
    for (int iter = 0; iter < cx.o.iters; ++iter) cx.b.barrier();
    barrier_local = std::chrono::duration<double>(Clock::now() - b0).count() / cx.o.iters;
  }
  const double seconds = combine_time(cx, local);

  SideResult r;
  r.time_us = seconds * 1.0e6;
  if (cx.o.blocking) r.barrier_us = combine_time(cx, barrier_local) * 1.0e6;
  const Bandwidth bw = bandwidth(c.coll, row_bytes(c.coll, count, cx.b.size(), size_of(c.type)), seconds, cx.b.size());
  r.algbw = bw.algbw;
  r.busbw = bw.busbw;
  cx.b.barrier();

  // nccl-tests reports in-place all_to_all and sendrecv as N/A; those are not checked.
  r.checked = cx.o.check > 0 && (!in_place || checks_in_place(c.coll));
  for (int k = 0; r.checked && k < cx.o.check; ++k) {
    s.seed = ++cx.check_rep;
    prepare(cx, s);
    start(cx, s, 0);
    cx.recv.to_host(touched_bytes(s));
    const int64_t wrong = count_wrong(s, cx.recv.host_data());
    if (wrong) ++cx.local_errors;
    r.wrong = static_cast<int64_t>(cx.b.all_reduce(static_cast<double>(wrong), ScalarOp::sum));
    if (r.wrong) break;
  }
  cx.busbw_sum += r.busbw;
  ++cx.busbw_count;
  return r;
}

void warmup(Context& cx, const Case& c, uint64_t bytes) {
  const CheckSpec s = spec_for(cx, c, call_count(c.coll, bytes / size_of(c.type), cx.b.size()), false);
  for (int iter = 0; iter < cx.o.warmup_iters; ++iter) start(cx, s, iter);
}

void time_test(Context& cx, const Case& c, const std::vector<uint64_t>& sizes, RunSummary& summary) {
  cx.b.barrier();
  warmup(cx, c, cx.o.max_bytes);
  warmup(cx, c, cx.o.min_bytes);
  for (uint64_t size : sizes) {
    const size_t count = call_count(c.coll, size / size_of(c.type), cx.b.size());
    RowRecord row;
    row.collective = name(c.coll);
    row.ranks = cx.b.size();
    row.key.bytes = row_bytes(c.coll, count, cx.b.size(), size_of(c.type));
    row.key.count = count;
    row.key.type = name(c.type);
    row.key.op = has_op(c.coll) ? name(c.op) : "none";
    row.key.root = c.root;
    if (cx.printer()) cx.out << row_key(row.key) << std::flush;
    row.out_of_place = bench_time(cx, c, count, false);
    if (cx.printer()) cx.out << row_side(row.out_of_place) << std::flush;
    if (cx.o.in_place) row.in_place = bench_time(cx, c, count, true);
    else row.in_place.skipped = true;
    if (cx.printer()) cx.out << row_side(row.in_place) << std::endl;
    summary.rows.push_back(std::move(row));
  }
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

int run_benchmark(Backend& backend, const Options& o, RunSummary& summary, std::ostream& out) {
  const std::vector<uint64_t> sizes = size_sweep(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor);
  std::unique_ptr<BenchBuffer> send = backend.make_buffer(o.max_bytes);
  std::unique_ptr<BenchBuffer> recv = backend.make_buffer(o.max_bytes);
  Context cx{backend, o, out, *send, *recv, o.max_bytes};

  summary.backend = backend.name();
  summary.collective = name(o.coll);
  summary.ranks = backend.size();
  summary.options = o;

  if (cx.printer()) {
    Preamble p;
    p.tool = summary.tool;
    p.version = summary.version;
    p.backend = summary.backend;
    p.collective = summary.collective;
    p.min_bytes = o.min_bytes;
    p.max_bytes = o.max_bytes;
    p.step_bytes = o.step_bytes;
    p.step_factor = o.step_factor;
    p.warmup_iters = o.warmup_iters;
    p.iters = o.iters;
    p.check = o.check;
    p.blocking = o.blocking;
    p.nranks = backend.size();
    p.pid = static_cast<int>(getpid());
    p.hostname = host_name();
    p.device = backend.device_text();
    for (const std::string& line : preamble_lines(p)) out << line << '\n';
    for (const std::string& line : header_lines(o.report_cputime)) out << line << '\n';
    out << std::flush;
  }

  const std::vector<ReduceOp> no_op = {ReduceOp::sum};
  const std::vector<ReduceOp>& ops = has_op(o.coll) ? o.ops : no_op;
  std::vector<int> roots = {-1};
  if (has_root(o.coll)) {
    roots.clear();
    if (o.root >= 0) {
      roots.push_back(o.root);
    } else {
      for (int r = 0; r < backend.size(); ++r) roots.push_back(r);
    }
  }

  for (DataType t : o.types) {
    for (ReduceOp op : ops) {
      for (int root : roots) {
        const Case c{o.coll, t, op, root};
        if (!backend.supports(c.coll, c.type, c.op)) {
          if (cx.printer())
            out << "# skipped: " << backend.name() << " has no " << name(c.coll) << " for type "
                << name(t) << (has_op(c.coll) ? std::string(" op ") + name(op) : std::string()) << '\n';
          continue;
        }
        time_test(cx, c, sizes, summary);
      }
    }
  }

  summary.error_count =
      static_cast<int>(backend.all_reduce(static_cast<double>(cx.local_errors), ScalarOp::sum));
  summary.avg_busbw = cx.busbw_count ? cx.busbw_sum / cx.busbw_count : 0.0;
  if (cx.printer()) {
    for (const std::string& line : footer_lines(summary.error_count, summary.avg_busbw, summary.collective))
      out << line << '\n';
    out << std::flush;
  }
  return summary.error_count ? 1 : 0;
}

}  // namespace perf
