// strata-fault-worker: one rank of the kill-and-stop matrix (test_fault_matrix.cpp). All
// ranks loop over one operation, FAULT_COLL of FAULT_BYTES per rank (all_reduce,
// reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv: a ring exchange in a
// group, barrier), until it fails; rank FAULT_VICTIM sends itself FAULT_SIGNAL (KILL or
// STOP) FAULT_AFTER_US into the loop. A stopped victim is killed STRATA_TIMEOUT + 2 s later
// if nothing has ended it before (strata-run continues and stops it when a survivor exits).
//
// Lines on stderr: READY secret=<the first 12 hex digits of STRATA_SECRET, which name the
// job's shared-memory segments>; FAULT at=<CLOCK_MONOTONIC s> (the victim, as it signals
// itself); CAUGHT at= after= class= kind= peer= msg= (a survivor); then after_error's lines.
// Exit codes: 3 a survivor caught its error, 4 no error within 3 x STRATA_TIMEOUT, 10 init
// failed, 11 an unknown FAULT_COLL.
#include <signal.h>

#include <strata/strata.hpp>

#include "worker_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace strata;
using namespace strata_test;

namespace {

// One call of `coll` over buffers big enough for any of them (n x count elements).
std::function<void()> operation(Comm& c, const std::string& coll, std::vector<float>& x, std::vector<float>& y,
                                size_t count) {
  const int n = c.size(), r = c.rank();
  const DataType f = DataType::float32;
  if (coll == "all_reduce") return [&, count, f] { c.all_reduce(x.data(), y.data(), count, f, ReduceOp::sum); };
  if (coll == "reduce_scatter") return [&, count, f] { c.reduce_scatter(x.data(), y.data(), count, f, ReduceOp::sum); };
  if (coll == "all_gather") return [&, count, f] { c.all_gather(x.data(), y.data(), count, f); };
  if (coll == "broadcast") return [&, count, f] { c.broadcast(x.data(), y.data(), count, f, 0); };
  if (coll == "reduce") return [&, count, f, n] { c.reduce(x.data(), y.data(), count, f, ReduceOp::sum, n - 1); };
  if (coll == "all_to_all") return [&, count, f] { c.all_to_all(x.data(), y.data(), count, f); };
  if (coll == "send_recv")
    return [&, count, f, n, r] {
      c.group_start();
      c.send(x.data(), count, f, (r + 1) % n);
      c.recv(y.data(), count, f, (r - 1 + n) % n);
      c.group_end();
    };
  if (coll == "barrier") return [&] { c.barrier(); };
  return nullptr;
}

}  // namespace

int main() {
  Comm comm = init_or_exit();
  const char* secret = getenv("STRATA_SECRET");
  fprintf(stderr, "READY rank=%d secret=%.12s\n", comm.rank(), secret ? secret : "");
  const std::string coll = getenv("FAULT_COLL") ? getenv("FAULT_COLL") : "all_reduce";
  const size_t count = std::max<size_t>(1, static_cast<size_t>(env_int("FAULT_BYTES", 1 << 20)) / sizeof(float));
  std::vector<float> x(count * comm.size(), 1.0f), y(count * comm.size());
  const std::function<void()> op = operation(comm, coll, x, y, count);
  if (!op) {
    fprintf(stderr, "unknown FAULT_COLL %s\n", coll.c_str());
    return 11;
  }
  const int timeout = env_int("STRATA_TIMEOUT", 30);
  comm.barrier();  // connected and in step before the loop starts
  if (comm.rank() == env_int("FAULT_VICTIM", 1)) {
    const bool stop = getenv("FAULT_SIGNAL") && std::strcmp(getenv("FAULT_SIGNAL"), "STOP") == 0;
    if (stop) reap_later(timeout + 2.0);
    signal_self_after(env_int("FAULT_AFTER_US", 100000), stop ? SIGSTOP : SIGKILL, "FAULT");
  }
  const double t0 = mono_s();
  double t_op = t0;
  try {
    while (mono_s() - t0 < 3.0 * timeout) {
      t_op = mono_s();
      op();
    }
  } catch (const Error& e) {
    report("CAUGHT", e, mono_s() - t_op);
    after_error(comm);
  }
  fprintf(stderr, "NO-ERROR\n");
  return 4;
}
