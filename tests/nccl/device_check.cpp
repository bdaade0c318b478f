// What the NCCL front end does with device buffers beyond the collectives matrix
// (collectives_check_device): stream order between calls, a group of collectives and
// transfers, that a call returns before its stream reaches it, pre-multiplied sums, and
// ncclCommGetAsyncError reporting a dead peer. Buffers from ncclMemAlloc on
// Strata's device layer (harness_device.cpp); run with STRATA_DEVICE=emulated.
//   strata-run -n 3 device_check ID_FILE
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "strata/device.hpp"

namespace {

constexpr size_t kCount = 1000;

bool last_error_has(const char* text) { return std::strstr(ncclGetLastError(nullptr), text) != nullptr; }

// `n` doubles of device memory holding `values`.
void* device_doubles(const std::vector<double>& values) {
  void* d = harness_alloc(values.size() * sizeof(double));
  harness_upload(d, values.data(), values.size() * sizeof(double));
  return d;
}

std::vector<double> read_doubles(const void* d, size_t n) {
  std::vector<double> v(n);
  harness_download(v.data(), d, n * sizeof(double));
  return v;
}

double input(int rank, size_t i) { return rank + 1 + static_cast<double>(i % 7); }

// Two all-reduces in place and an all-gather of the result, queued back to back on one
// stream, read by a copy on it: each must wait for the one before.
void chained(ncclComm_t comm) {
  const int n = g_size;
  std::vector<double> mine(kCount);
  for (size_t i = 0; i < kCount; ++i) mine[i] = input(g_rank, i);
  void* x = device_doubles(mine);
  void* all = harness_alloc(n * kCount * sizeof(double));
  CHECK_RESULT(ncclAllReduce(x, x, kCount, ncclFloat64, ncclSum, comm, harness_stream()), ncclSuccess);
  CHECK_RESULT(ncclAllReduce(x, x, kCount, ncclFloat64, ncclSum, comm, harness_stream()), ncclSuccess);
  CHECK_RESULT(ncclAllGather(x, all, kCount, ncclFloat64, comm, harness_stream()), ncclSuccess);
  const std::vector<double> got = read_doubles(all, n * kCount);
  size_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += input(r, i);
    for (int r = 0; r < n; ++r) wrong += got[r * kCount + i] != n * sum;
  }
  CHECK(wrong == 0, ("all-reduce, all-reduce, all-gather chained on one stream: " + std::to_string(wrong) + " wrong").c_str());
  harness_free(x);
  harness_free(all);
}

// One group: an all-reduce, a broadcast from the last rank, and a send to the next rank
// with a receive from the previous one, all on device buffers.
void group(ncclComm_t comm) {
  const int n = g_size, root = n - 1;
  std::vector<double> mine(kCount);
  for (size_t i = 0; i < kCount; ++i) mine[i] = input(g_rank, i);
  void* a = device_doubles(mine);
  void* b = device_doubles(mine);
  void* from_prev = harness_alloc(kCount * sizeof(double));
  MUST(ncclGroupStart());
  CHECK_RESULT(ncclAllReduce(a, a, kCount, ncclFloat64, ncclMax, comm, harness_stream()), ncclSuccess);
  CHECK_RESULT(ncclSend(b, kCount, ncclFloat64, (g_rank + 1) % n, comm, harness_stream()),
               ncclSuccess);
  CHECK_RESULT(ncclRecv(from_prev, kCount, ncclFloat64, (g_rank + n - 1) % n, comm, harness_stream()), ncclSuccess);
  CHECK_RESULT(ncclGroupEnd(), ncclSuccess);
  // The broadcast overwrites b, which the group's send reads: stream order keeps them apart.
  CHECK_RESULT(ncclBroadcast(b, b, kCount, ncclFloat64, root, comm, harness_stream()), ncclSuccess);
  const std::vector<double> got_a = read_doubles(a, kCount), got_b = read_doubles(b, kCount),
                            got_prev = read_doubles(from_prev, kCount);
  size_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i) {
    wrong += got_a[i] != input(n - 1, i);  // the largest rank's input is the largest
    wrong += got_b[i] != input(root, i);
    wrong += got_prev[i] != input((g_rank + n - 1) % n, i);
  }
  CHECK(wrong == 0, ("a group of all-reduce and send/recv, then a broadcast: " + std::to_string(wrong) + " wrong").c_str());
  harness_free(a);
  harness_free(b);
  harness_free(from_prev);
}

// Holds harness_stream() at this point (a host function queued on it) until opened; the
// stream must have passed it before the gate goes.
struct Gate {
  std::atomic<bool> open{false};
  Gate() {
    strata::device::launch_host_func(
        static_cast<strata::device::Stream>(harness_stream()),
        [](void* gate) {
          while (!static_cast<Gate*>(gate)->open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        },
        this);
  }
};

// The stream is held until the call has returned: a call that waited for its device work
// would never return (a watchdog opens the gate after 20 s).
void returns_at_once(ncclComm_t comm) {
  std::vector<double> mine(kCount, g_rank + 1.0);
  void* x = device_doubles(mine);
  Gate gate;
  std::atomic<bool> returned{false};
  std::thread watchdog([&] {
    const double give_up = harness_now() + 20;
    while (!returned.load() && harness_now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.open = true;
  });
  CHECK_RESULT(ncclAllReduce(x, x, kCount, ncclFloat64, ncclSum, comm, harness_stream()), ncclSuccess);
  CHECK(!gate.open.load(), "ncclAllReduce on device buffers returns while its stream is held");
  returned = true;
  watchdog.join();
  const std::vector<double> got = read_doubles(x, kCount);
  const double want = g_size * (g_size + 1) / 2.0;
  size_t wrong = 0;
  for (double v : got) wrong += v != want;
  CHECK(wrong == 0, "the all-reduce queued behind the held stream is right once it runs");
  harness_free(x);
}

// Pre-multiplied sums on device buffers (PyTorch FSDP's PREMUL_SUM): each rank's input
// times its own factor, then summed; the factor a host value (copied when the op is made)
// or in device memory (read when the call runs: written on the stream just before it), in
// double and bfloat16, all-reduce out of place and in place, reduce-scatter, reduce.
// Inputs and factors are exact in both types, so the reference is a serial sum in double.
void premul_on_device(ncclComm_t comm) {
  const int n = g_size;
  auto factor_of = [](int rank) { return 0.5 * (rank + 1); };
  auto value = [](int rank, size_t i) { return static_cast<double>((rank + i) % 5 + 1); };
  for (ncclDataType_t t : {ncclFloat64, ncclBfloat16}) {
    const size_t esz = harness_size(t);
    for (ncclScalarResidence_t where : {ncclScalarHostImmediate, ncclScalarDevice}) {
      const std::string what = std::string(harness_type_name(t)) +
                               (where == ncclScalarDevice ? ", factor in device memory" : ", factor a host value");
      std::vector<char> factor(esz);
      // A device factor holds a wrong value when the op is made and the right one when the
      // call runs.
      harness_put(factor.data(), t, 0, where == ncclScalarDevice ? 100.0 : factor_of(g_rank));
      void* dfactor = harness_alloc(esz);
      harness_upload(dfactor, factor.data(), esz);
      ncclRedOp_t op;
      MUST(ncclRedOpCreatePreMulSum(&op, where == ncclScalarDevice ? dfactor : factor.data(), t, where, comm));
      if (where == ncclScalarDevice) {
        harness_put(factor.data(), t, 0, factor_of(g_rank));
        harness_upload(dfactor, factor.data(), esz);
      }
      const size_t total = n * kCount;
      std::vector<char> in(total * esz);
      for (size_t i = 0; i < total; ++i) harness_put(in.data(), t, i, value(g_rank, i));
      auto want = [&](size_t i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += factor_of(r) * value(r, i);
        return sum;
      };
      void* x = harness_alloc(total * esz);
      void* y = harness_alloc(total * esz);
      for (const char* coll : {"all-reduce", "all-reduce in place", "reduce-scatter", "reduce"}) {
        harness_upload(x, in.data(), total * esz);
        const std::string name = what + ", " + coll;
        const bool in_place = std::strcmp(coll, "all-reduce in place") == 0;
        size_t first = 0, count = total;
        if (!std::strcmp(coll, "all-reduce")) {
          CHECK_RESULT(ncclAllReduce(x, y, total, t, op, comm, harness_stream()), ncclSuccess);
        } else if (in_place) {
          CHECK_RESULT(ncclAllReduce(x, x, total, t, op, comm, harness_stream()), ncclSuccess);
        } else if (!std::strcmp(coll, "reduce-scatter")) {
          CHECK_RESULT(ncclReduceScatter(x, y, kCount, t, op, comm, harness_stream()), ncclSuccess);
          first = g_rank * kCount;
          count = kCount;
        } else {
          CHECK_RESULT(ncclReduce(x, y, total, t, op, 0, comm, harness_stream()), ncclSuccess);
          if (g_rank != 0) count = 0;
        }
        std::vector<char> got(total * esz);
        harness_download(got.data(), in_place ? x : y, total * esz);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += harness_get(got.data(), t, i) != want(first + i);
        CHECK(wrong == 0, (name + ": " + std::to_string(wrong) + " wrong").c_str());
        if (!in_place) {
          harness_download(got.data(), x, total * esz);
          CHECK(got == in, (name + ": the input is left as it was").c_str());
        }
      }
      MUST(ncclRedOpDestroy(op, comm));
      harness_free(x);
      harness_free(y);
      harness_free(dfactor);
    }
  }
  // Host buffers with a factor in device memory cannot be scaled before the call: refused
  // naming why, and the communicator goes on.
  double h[4] = {1, 2, 3, 4};
  void* dfactor = device_doubles({2.0});
  ncclRedOp_t op;
  MUST(ncclRedOpCreatePreMulSum(&op, dfactor, ncclFloat64, ncclScalarDevice, comm));
  CHECK_RESULT(ncclAllReduce(h, h, 4, ncclFloat64, op, comm, nullptr), ncclInvalidUsage);
  CHECK(last_error_has("ncclScalarDevice") && last_error_has("host buffers"), "the refusal names why");
  MUST(ncclRedOpDestroy(op, comm));
  harness_free(dfactor);
  CHECK_RESULT(ncclAllReduce(h, h, 4, ncclFloat64, ncclSum, comm, nullptr), ncclSuccess);
  CHECK(h[3] == 4.0 * g_size, "the communicator works after the refusal");
}

// The others queue an all-reduce on device buffers behind a held stream (it returns at
// once), then the last rank aborts its copy of the communicator, then the stream goes on:
// the all-reduce fails after its call returned, and ncclCommGetAsyncError reports it,
// naming the rank. Every rank runs one all-reduce on `dup` first: as under NCCL's runtime
// connect, a rank's first call that needs a peer connects it, with the peer in the same
// call, so the call that the last rank never makes must not be the first.
void dead_peer(ncclComm_t world) {
  ncclComm_t dup = nullptr;
  MUST(ncclCommSplit(world, 0, g_rank, &dup, nullptr));
  const int last = g_size - 1;
  {
    void* w = harness_alloc(kCount * sizeof(double));
    MUST(ncclAllReduce(w, w, kCount, ncclFloat64, ncclSum, dup, harness_stream()));
    harness_sync();
    harness_free(w);
  }
  float h = 0, k = 0;
  if (g_rank != last) {
    void* x = harness_alloc(kCount * sizeof(double));
    Gate gate;
    CHECK_RESULT(ncclAllReduce(x, x, kCount, ncclFloat64, ncclSum, dup, harness_stream()), ncclSuccess);
    MUST(ncclAllReduce(&h, &k, 1, ncclFloat32, ncclSum, world, nullptr));  // queued: now the last rank goes
    MUST(ncclAllReduce(&h, &k, 1, ncclFloat32, ncclSum, world, nullptr));  // it has aborted
    gate.open = true;
    ncclResult_t state = ncclSuccess;
    const double give_up = harness_now() + 60;
    while (state == ncclSuccess && harness_now() < give_up) {
      MUST(ncclCommGetAsyncError(dup, &state));
      if (state == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(state == ncclRemoteError, "ncclCommGetAsyncError reports the dead peer as ncclRemoteError");
    CHECK(last_error_has(("rank " + std::to_string(last)).c_str()), "its last error names the dead rank");
    harness_sync();  // the failed operation released the stream
    harness_free(x);
    CHECK_RESULT(ncclCommAbort(dup), ncclSuccess);
  } else {
    MUST(ncclAllReduce(&h, &k, 1, ncclFloat32, ncclSum, world, nullptr));
    MUST(ncclCommAbort(dup));
    MUST(ncclAllReduce(&h, &k, 1, ncclFloat32, ncclSum, world, nullptr));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: device_check ID_FILE (under strata-run, STRATA_DEVICE=emulated)\n");
    return 2;
  }
  ncclComm_t world = harness_world(argv[1]);
  chained(world);
  group(world);
  returns_at_once(world);
  premul_on_device(world);
  dead_peer(world);
  MUST(ncclCommDestroy(world));
  return harness_report("device_check");
}
