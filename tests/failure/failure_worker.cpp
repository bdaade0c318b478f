// strata-failure-worker MODE: one rank of a job started by test_failure (not by
// strata-run, which would kill the survivors). Every line the harness checks starts with
// a capitalised marker on stderr.
//
//   killed : all ranks loop over a 64 MiB float32 all_reduce; rank 2 SIGKILLs itself
//            ~100 ms into the loop. Survivors must catch a strata::Error.
//   killed-shared: the same on strata::alloc(host) buffers, which peers read in place.
//   stuck  : rank 1 sleeps instead of joining an all_reduce; the others must time out.
//   abort  : rank 0 calls abort() from a second thread while its main thread waits in an
//            all_reduce nobody else joins yet; ranks 1 and 2 call all_reduce afterwards
//            (the first may complete with rank 0's already delivered data; a later one
//            must fail).
//   departs: rank 1 destroys the communicator instead of joining an all_reduce; the
//            others must catch a PeerError naming it, long before STRATA_TIMEOUT.
//   stopped: all ranks loop over a 256 KiB all_reduce; rank FAILURE_STOP_RANK SIGSTOPs
//            itself FAILURE_STOP_AFTER_MS into the loop (a child kills it STRATA_TIMEOUT
//            + 2.5 s after the loop starts). Survivors must time out naming it, not a neighbour waiting on it.
//   device-killed, device-stopped: the same on device buffers (STRATA_DEVICE), each
//            all_reduce on a stream followed by a synchronisation of that stream: the
//            failure must release the stream, and a survivor checks that its device still
//            copies bytes in and out afterwards (DEVICE-USABLE).
//
// Exit codes: 3 caught the expected error (survivor), 0 the stuck rank finished,
// 4 no error where one was expected, 5 an all_reduce returned a wrong result,
// 10 init failed, 11 unexpected exception.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <strata/device.hpp>
#include <strata/strata.hpp>

#include "worker_common.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace strata;

namespace {

using strata_test::after_error;
using strata_test::env_int;
using strata_test::init_or_exit;
using strata_test::mono_s;
using strata_test::report;
using strata_test::signal_self_after;

int timeout_s() {
  const char* t = getenv("STRATA_TIMEOUT");
  return t ? atoi(t) : 30;
}

// All ranks repeat `call` until it fails (then `caught`, and after_error) or 3 ×
// STRATA_TIMEOUT passes (exit code 4).
int loop_until_error(Comm& comm, const std::function<void()>& call, const std::function<void()>& caught) {
  const double t0 = mono_s();
  double t_op = t0;
  int it = 0;
  try {
    for (; mono_s() - t0 < 3.0 * timeout_s(); ++it) {
      t_op = mono_s();
      call();
    }
  } catch (const Error& e) {
    fprintf(stderr, "ITERATIONS %d loop_time=%.3f\n", it, mono_s() - t0);
    report("CAUGHT", e, mono_s() - t_op);
    caught();
    after_error(comm);
  }
  fprintf(stderr, "NO-ERROR after %d iterations\n", it);
  return 4;
}

// The loop over host float all_reduces.
int loop_all_reduces(Comm& comm, std::vector<float>& x, std::vector<float>& y) {
  return loop_until_error(
      comm, [&] { comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum); }, [] {});
}

// After a device call failed: the device still works (a copy in and out of device memory
// on the stream the call used gives the bytes back).
void check_device_usable(device::Stream s) {
  const size_t n = 4096;
  auto* in = static_cast<uint8_t*>(strata::alloc(n, MemoryKind::host));
  auto* out = static_cast<uint8_t*>(strata::alloc(n, MemoryKind::host));
  void* d = strata::alloc(n);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 13), out[i] = 0;
  const double t = mono_s();
  device::memcpy_async(d, in, n, s);
  device::memcpy_async(out, d, n, s);
  device::stream_synchronize(s);
  fprintf(stderr, "%s after=%.3f\n", std::memcmp(in, out, n) == 0 ? "DEVICE-USABLE" : "DEVICE-BROKEN", mono_s() - t);
  strata::free(d);
  strata::free(in);
  strata::free(out);
}

// The loop above on device buffers: each all_reduce on a stream, then the stream is
// synchronised (it must be released when a peer fails) and the Request waited on.
// `start` runs once every rank is connected and in step, before the loop.
int loop_device_all_reduces(Comm& comm, size_t count, const std::function<void()>& start) {
  device::Stream s = device::stream_create();
  void* x = strata::alloc(count * sizeof(float));
  void* y = strata::alloc(count * sizeof(float));
  device::memset_async(x, 0, count * sizeof(float), s);
  device::stream_synchronize(s);
  comm.barrier();
  start();
  return loop_until_error(
      comm,
      [&] {
        Request r = comm.all_reduce(x, y, count, DataType::float32, ReduceOp::sum, s);
        device::stream_synchronize(s);
        r.wait();
      },
      [&] { check_device_usable(s); });
}

int mode_device(Comm& comm, int sig) {
  const int victim = sig == SIGKILL ? 2 : env_int("FAILURE_STOP_RANK", 0);
  return loop_device_all_reduces(comm, sig == SIGKILL ? (size_t(4) << 20) / sizeof(float) : 65536, [&] {
    if (comm.rank() != victim) return;
    if (sig == SIGSTOP) strata_test::reap_later(timeout_s() + 2.5);
    signal_self_after(env_int("FAILURE_STOP_AFTER_MS", 100) * 1000L, sig,
                      sig == SIGKILL ? "RANK2-KILLING-ITSELF" : "STOPPING-ITSELF");
  });
}

// `shared`: the buffers come from strata::alloc(host), so peers read them in place
// (zero-copy) and hold rank 2's mapped when it dies.
int mode_killed(Comm& comm, bool shared) {
  const size_t count = (size_t(64) << 20) / sizeof(float);
  std::vector<float> own_x, own_y;
  float* x = nullptr;
  float* y = nullptr;
  if (shared) {
    x = static_cast<float*>(strata::alloc(count * sizeof(float), MemoryKind::host));
    y = static_cast<float*>(strata::alloc(count * sizeof(float), MemoryKind::host));
  } else {
    own_x.resize(count), own_y.resize(count);
    x = own_x.data(), y = own_y.data();
  }
  std::fill(x, x + count, 1.0f);
  comm.barrier();  // everyone is connected and in step before the loop starts
  if (comm.rank() == 2) signal_self_after(100000, SIGKILL, "RANK2-KILLING-ITSELF");
  return loop_until_error(
      comm, [&] { comm.all_reduce(x, y, count, DataType::float32, ReduceOp::sum); }, [] {});
}

int mode_stopped(Comm& comm) {
  std::vector<float> x(65536, 1.0f), y(65536);
  comm.barrier();
  if (comm.rank() == env_int("FAILURE_STOP_RANK", 0)) {
    strata_test::reap_later(timeout_s() + 2.5);
    signal_self_after(env_int("FAILURE_STOP_AFTER_MS", 100) * 1000L, SIGSTOP, "STOPPING-ITSELF");
  }
  return loop_all_reduces(comm, x, y);
}

// Rank 1 does not join the all_reduce: it sleeps past the timeout first (stuck), or
// destroys the communicator at once (departs).
int mode_rank1_absent(Comm& comm, bool departs) {
  std::vector<float> x(1 << 20, 2.0f), y(1 << 20);
  comm.barrier();
  if (comm.rank() == 1) {
    if (departs) {
      comm.destroy();
      fprintf(stderr, "DEPARTED\n");
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::seconds(timeout_s() + 2));
    double t = mono_s();
    try {
      comm.destroy();
      fprintf(stderr, "STUCK-RANK-DESTROY-RETURNED after=%.3f\n", mono_s() - t);
    } catch (const Error& e) {
      report("STUCK-RANK-DESTROY-THREW", e, mono_s() - t);
    }
    fprintf(stderr, "STUCK-RANK-DONE\n");
    return 0;
  }
  double t = mono_s();
  try {
    comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum);
  } catch (const Error& e) {
    report("CAUGHT", e, mono_s() - t);
    after_error(comm);
  }
  fprintf(stderr, "NO-ERROR all_reduce returned after %.3f s without rank 1\n", mono_s() - t);
  return 4;
}

int mode_abort(Comm& comm) {
  const int rank = comm.rank();
  std::vector<float> x(4096, static_cast<float>(rank + 1)), y(4096);
  comm.barrier();
  if (rank == 0) {
    std::atomic<double> t_abort{0};
    std::thread th([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      t_abort = mono_s();
      try {
        comm.abort();
        fprintf(stderr, "ABORT-RETURNED after=%.3f\n", mono_s() - t_abort);
      } catch (const Error& e) {
        report("ABORT-THREW", e, mono_s() - t_abort);
      }
    });
    double t = mono_s();
    try {
      comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum);
      th.join();
      fprintf(stderr, "NO-ERROR all_reduce returned after %.3f s\n", mono_s() - t);
      return 4;
    } catch (const Error& e) {
      double now = mono_s();
      double since_abort = t_abort.load() > 0 ? now - t_abort.load() : -1;
      fprintf(stderr, "WAITER since_abort=%.3f\n", since_abort);
      report("CAUGHT", e, now - t);
      th.join();
      after_error(comm);
    }
  }
  // Ranks 1 and 2 join only after rank 0 has aborted. Their first all_reduce matches the
  // one rank 0 was waiting in: rank 0 may already have delivered its data, so it may
  // complete (then its result must be right). The next one needs rank 0 again and must
  // fail promptly (rank 0 closed its connections), long before STRATA_TIMEOUT.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  const float expect = comm.size() * (comm.size() + 1) / 2.0f;
  for (int call = 0; call < 4; ++call) {
    double t = mono_s();
    std::fill(y.begin(), y.end(), -1.0f);
    try {
      comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum);
    } catch (const Error& e) {
      fprintf(stderr, "CALLS-BEFORE-ERROR %d\n", call);
      report("CAUGHT", e, mono_s() - t);
      after_error(comm);
    }
    size_t wrong = 0;
    for (float v : y)
      if (v != expect) ++wrong;
    fprintf(stderr, "NO-ERROR call %d: all_reduce returned after %.3f s; y[0]=%g, %zu of %zu elements != %g\n",
            call, mono_s() - t, y[0], wrong, y.size(), expect);
    if (wrong) {
      fprintf(stderr, "WRONG-RESULT\n");
      return 5;
    }
  }
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: strata-failure-worker killed|stuck|abort\n");
    return 11;
  }
  std::string mode = argv[1];
  Comm comm = init_or_exit();
  fprintf(stderr, "READY rank=%d size=%d\n", comm.rank(), comm.size());
  try {
    if (mode == "killed") return mode_killed(comm, false);
    if (mode == "killed-shared") return mode_killed(comm, true);
    if (mode == "stuck") return mode_rank1_absent(comm, false);
    if (mode == "abort") return mode_abort(comm);
    if (mode == "departs") return mode_rank1_absent(comm, true);
    if (mode == "stopped") return mode_stopped(comm);
    if (mode == "device-killed") return mode_device(comm, SIGKILL);
    if (mode == "device-stopped") return mode_device(comm, SIGSTOP);
  } catch (const Error& e) {
    report("UNEXPECTED", e, 0);
    return 11;
  }
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 11;
}
