// NCCL's semantics beyond moving data, on host buffers: compiled as C++ against NVIDIA's
// nccl.h (where installed) and linked with Strata's libnccl.so.2.
//   strata-run -n 3 semantics_check ID_FILE        (or mpirun -np 3 ...)
// Creation (a config from an older header, non-blocking polled to completion, inside a
// group, ncclCommInitAll driven from one thread), queries, split (non-blocking too, and
// NCCL_SPLIT_NOCOLOR), groups mixing collectives and transfers, pre-multiplied sums, fp8,
// ncclMemAlloc and registration, bad arguments answered with NCCL's codes, the abort of a
// stuck call, shrink after a rank aborted, finalize and destroy. Prints
// "semantics_check rank R: N checks, F failed"; exit 0 when none failed.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ground/device/shared_host.hpp"  // whether a registered buffer was made shareable
#include "harness.h"
#include "strata/types.hpp"  // whether this Strata has fp8 types: then fp8 calls must work

namespace {

bool last_error_has(const char* text) { return std::strstr(ncclGetLastError(nullptr), text) != nullptr; }

void barrier(ncclComm_t world) {
  float x = 0, y = 0;
  MUST(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, world, nullptr));
}

// Polls until the communicator is no longer in progress; its final state.
ncclResult_t poll(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  const double give_up = harness_now() + 60;
  while (state == ncclInProgress && harness_now() < give_up) {
    MUST(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

// The communicator has `size` ranks, this one `rank`, and an all-reduce over it is right.
void check_works(ncclComm_t comm, int size, int rank, const std::string& what) {
  int n = -1, r = -1;
  CHECK_RESULT(ncclCommCount(comm, &n), ncclSuccess);
  CHECK_RESULT(ncclCommUserRank(comm, &r), ncclSuccess);
  CHECK(n == size && r == rank, (what + ": size and rank").c_str());
  double x = rank + 1, y = 0;
  CHECK_RESULT(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, nullptr), ncclSuccess);
  CHECK(y == size * (size + 1) / 2.0, (what + ": all-reduce of rank + 1").c_str());
}

// A fresh unique id from world rank 0, broadcast over `world`.
ncclUniqueId shared_id(ncclComm_t world) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (g_rank == 0) MUST(ncclGetUniqueId(&id));
  MUST(ncclBroadcast(&id, &id, sizeof id, ncclInt8, 0, world, nullptr));
  return id;
}

void creation(ncclComm_t world) {
  // Non-blocking: ncclInProgress at once, then polled to ncclSuccess.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb = nullptr;
  CHECK_RESULT(ncclCommInitRankConfig(&nb, g_size, shared_id(world), g_rank, &cfg), ncclInProgress);
  CHECK(nb != nullptr, "a non-blocking creation hands out its communicator at once");
  CHECK_RESULT(poll(nb), ncclSuccess);
  check_works(nb, g_size, g_rank, "non-blocking creation");
  // Its splits inherit non-blocking: in progress, then done.
  ncclComm_t half = nullptr;
  CHECK_RESULT(ncclCommSplit(nb, g_rank % 2, g_rank, &half, nullptr), ncclInProgress);
  CHECK_RESULT(poll(half), ncclSuccess);
  CHECK_RESULT(poll(nb), ncclSuccess);
  check_works(half, (g_size - g_rank % 2 + 1) / 2, g_rank / 2, "non-blocking split");
  MUST(ncclCommDestroy(half));
  MUST(ncclCommDestroy(nb));

  // Two communicators made in one group, the second with the ranks reversed.
  const ncclUniqueId a_id = shared_id(world), b_id = shared_id(world);
  ncclComm_t a = nullptr, b = nullptr;
  MUST(ncclGroupStart());
  CHECK_RESULT(ncclCommInitRank(&a, g_size, a_id, g_rank), ncclSuccess);
  CHECK_RESULT(ncclCommInitRankConfig(&b, g_size, b_id, g_size - 1 - g_rank, nullptr), ncclSuccess);
  CHECK_RESULT(ncclGroupEnd(), ncclSuccess);
  check_works(a, g_size, g_rank, "made in a group");
  check_works(b, g_size, g_size - 1 - g_rank, "made in a group, reversed");
  MUST(ncclCommDestroy(a));
  MUST(ncclCommDestroy(b));

  // Every rank of a 3-rank communicator in this process, then one group over all three:
  // only a group that runs them concurrently completes.
  ncclComm_t local[3] = {};
  CHECK_RESULT(ncclCommInitAll(local, 3, nullptr), ncclSuccess);
  float x[3] = {1, 2, 3}, y[3] = {};
  MUST(ncclGroupStart());
  for (int i = 0; i < 3; ++i) MUST(ncclAllReduce(&x[i], &y[i], 1, ncclFloat32, ncclSum, local[i], nullptr));
  CHECK_RESULT(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < 3; ++i) {
    int dev = -1, r = -1;
    MUST(ncclCommCuDevice(local[i], &dev));
    MUST(ncclCommUserRank(local[i], &r));
    CHECK(y[i] == 6 && r == i && dev == i, "ncclCommInitAll: one group over its three ranks");
  }
  for (ncclComm_t c : local) MUST(ncclCommDestroy(c));
}

void queries(ncclComm_t world) {
  int version = 0, device = -1;
  CHECK_RESULT(ncclGetVersion(&version), ncclSuccess);
  CHECK(version >= NCCL_VERSION(2, 28, 0), "ncclGetVersion reports the 2.28 ABI");
  CHECK_RESULT(ncclCommCuDevice(world, &device), ncclSuccess);
  CHECK(device == 0, "ncclCommCuDevice: 0 where no CUDA runtime is loaded");
  ncclResult_t state = ncclInternalError;
  CHECK_RESULT(ncclCommGetAsyncError(world, &state), ncclSuccess);
  CHECK(state == ncclSuccess, "a healthy communicator has no asynchronous error");
}

void splits(ncclComm_t world) {
  // Parity groups, ranked by descending world rank (key = -rank).
  ncclComm_t parity = nullptr;
  CHECK_RESULT(ncclCommSplit(world, g_rank % 2, -g_rank, &parity, nullptr), ncclSuccess);
  int mine = 0, above = 0;
  for (int r = 0; r < g_size; ++r)
    if (r % 2 == g_rank % 2) ++mine, above += r > g_rank;
  check_works(parity, mine, above, "split by parity, reversed");
  MUST(ncclCommDestroy(parity));
  // Rank 0 takes part and gets no communicator.
  ncclComm_t rest = reinterpret_cast<ncclComm_t>(&rest);
  CHECK_RESULT(ncclCommSplit(world, g_rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, g_rank, &rest, nullptr), ncclSuccess);
  if (g_rank == 0) CHECK(rest == nullptr, "NCCL_SPLIT_NOCOLOR gives a NULL communicator");
  else check_works(rest, g_size - 1, g_rank - 1, "split without rank 0");
  if (rest) MUST(ncclCommDestroy(rest));
}

void groups(ncclComm_t world) {
  const int n = g_size, next = (g_rank + 1) % n, prev = (g_rank + n - 1) % n;
  std::vector<int> sum_in(5, g_rank + 1), sum_out(5), gathered(n * 2), mine(2, g_rank);
  double bc = g_rank == n - 1 ? 42.0 : 0.0, to_next = g_rank, from_prev = -1;
  // Collectives and transfers in one group, nested once: all run at the outer end.
  MUST(ncclGroupStart());
  MUST(ncclAllReduce(sum_in.data(), sum_out.data(), 5, ncclInt32, ncclSum, world, nullptr));
  MUST(ncclGroupStart());
  MUST(ncclRecv(&from_prev, 1, ncclFloat64, prev, world, nullptr));
  MUST(ncclBcast(&bc, 1, ncclFloat64, n - 1, world, nullptr));
  MUST(ncclSend(&to_next, 1, ncclFloat64, next, world, nullptr));
  CHECK_RESULT(ncclGroupEnd(), ncclSuccess);
  CHECK(from_prev == -1, "nothing runs before the outermost ncclGroupEnd");
  MUST(ncclAllGather(mine.data(), gathered.data(), 2, ncclInt32, world, nullptr));
  CHECK_RESULT(ncclGroupEnd(), ncclSuccess);
  CHECK(sum_out[4] == n * (n + 1) / 2, "group: all-reduce");
  CHECK(bc == 42.0, "group: broadcast");
  CHECK(from_prev == prev, "group: ring of send and recv");
  bool all = true;
  for (int r = 0; r < n; ++r) all &= gathered[2 * r] == r && gathered[2 * r + 1] == r;
  CHECK(all, "group: all-gather");
  CHECK_RESULT(ncclGroupEnd(), ncclInvalidUsage);  // no group is open
}

// Each rank's input times its scalar, summed: sum over r of (r + 1) * x_r.
template <typename T>
void premul_sum(ncclComm_t world, ncclDataType_t type) {
  const int n = g_size;
  const size_t count = 33;
  std::vector<T> x(count), y(count);
  auto in = [](int r, size_t i) { return static_cast<double>(1 + (r + i) % 5); };
  for (size_t i = 0; i < count; ++i) harness_put(x.data(), type, i, in(g_rank, i));
  T scalar;
  harness_put(&scalar, type, 0, g_rank + 1);
  ncclRedOp_t op;
  CHECK_RESULT(ncclRedOpCreatePreMulSum(&op, &scalar, type, ncclScalarHostImmediate, world), ncclSuccess);
  CHECK(op >= ncclNumOps, "a pre-multiplied sum is a new ncclRedOp_t");
  CHECK_RESULT(ncclAllReduce(x.data(), y.data(), count, type, op, world, nullptr), ncclSuccess);
  bool ok = true;
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += (r + 1) * in(r, i);
    ok &= harness_get(y.data(), type, i) == want;
  }
  CHECK(ok, (std::string("pre-multiplied sum, ") + harness_type_name(type)).c_str());
  CHECK_RESULT(ncclRedOpDestroy(op, world), ncclSuccess);
  CHECK_RESULT(ncclAllReduce(x.data(), y.data(), count, type, op, world, nullptr), ncclInvalidArgument);
}

void premul(ncclComm_t world) {
  premul_sum<float>(world, ncclFloat32);
  premul_sum<double>(world, ncclFloat64);
  premul_sum<int32_t>(world, ncclInt32);
  premul_sum<uint8_t>(world, ncclUint8);
  premul_sum<uint16_t>(world, ncclFloat16);
  premul_sum<uint16_t>(world, ncclBfloat16);
  // Device residence: the scalar is read when the call runs, not when the op is made.
  float scalar = 100, x = 1, y = 0;
  ncclRedOp_t op;
  MUST(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarDevice, world));
  scalar = static_cast<float>(g_rank + 1);
  CHECK_RESULT(ncclReduce(&x, &y, 1, ncclFloat32, op, 0, world, nullptr), ncclSuccess);
  if (g_rank == 0) CHECK(y == g_size * (g_size + 1) / 2.0f, "pre-multiplied sum reads a device scalar at the call");
  std::vector<float> rs_in(g_size, 2.0f);
  CHECK_RESULT(ncclReduceScatter(rs_in.data(), &y, 1, ncclFloat32, op, world, nullptr), ncclSuccess);
  CHECK(y == g_size * (g_size + 1.0f), "pre-multiplied reduce-scatter");
  int32_t xi = 1, yi = 0;
  CHECK_RESULT(ncclAllReduce(&xi, &yi, 1, ncclInt32, op, world, nullptr), ncclInvalidArgument);  // made for float
  CHECK(last_error_has("ncclFloat32"), "a pre-multiplied sum used with another type is named");
  MUST(ncclRedOpDestroy(op, world));
  CHECK_RESULT(ncclRedOpDestroy(op, world), ncclInvalidArgument);
  CHECK_RESULT(ncclRedOpDestroy(ncclSum, world), ncclInvalidArgument);
}

void fp8(ncclComm_t world) {
  const bool strata_has_fp8 = strata::parse_datatype("f8e4m3").has_value();
  for (ncclDataType_t t : {ncclFloat8e4m3, ncclFloat8e5m2}) {
    uint8_t x[8], y[8];
    for (int i = 0; i < 8; ++i) harness_put(x, t, i, 1 + (g_rank + i) % 2);
    const ncclResult_t r = ncclAllReduce(x, y, 8, t, ncclSum, world, nullptr);
    if (!strata_has_fp8) {
      CHECK_RESULT(r, ncclInvalidArgument);
      CHECK(last_error_has(harness_type_name(t)), "an fp8 type this Strata lacks is named");
      continue;
    }
    CHECK_RESULT(r, ncclSuccess);
    bool ok = true;
    for (int i = 0; i < 8; ++i) {
      double want = 0;
      for (int rr = 0; rr < g_size; ++rr) want += 1 + (rr + i) % 2;
      ok &= harness_get(y, t, i) == want;
    }
    CHECK(ok, (std::string("fp8 all-reduce, ") + harness_type_name(t)).c_str());
  }
}

void memory(ncclComm_t world) {
  void* buf = nullptr;
  CHECK_RESULT(ncclMemAlloc(&buf, 1 << 20), ncclSuccess);
  auto* f = static_cast<float*>(buf);
  for (int i = 0; i < 1 << 18; ++i) f[i] = static_cast<float>(g_rank);
  CHECK_RESULT(ncclAllReduce(f, f, 1 << 18, ncclFloat32, ncclMax, world, nullptr), ncclSuccess);
  CHECK(f[0] == g_size - 1 && f[(1 << 18) - 1] == g_size - 1, "all-reduce in place in ncclMemAlloc's memory");
  void* handle = nullptr;
  CHECK_RESULT(ncclCommRegister(world, buf, 1 << 20, &handle), ncclSuccess);
  CHECK_RESULT(ncclCommDeregister(world, handle), ncclSuccess);
  CHECK_RESULT(ncclCommDeregister(world, handle), ncclInvalidArgument);
  CHECK_RESULT(ncclMemFree(buf), ncclSuccess);
  // Host memory another process can map (a memfd mapped MAP_SHARED) is registered with
  // the Strata communicator (Comm::register_buffer: the node's peers read it in place) until
  // deregistered; private memory is accepted and used as it is.
  const size_t bytes = 1 << 20;
  const int fd = memfd_create("semantics-check", MFD_CLOEXEC);
  void* shared = fd >= 0 && ftruncate(fd, bytes) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                                      : MAP_FAILED;
  CHECK(shared != MAP_FAILED, "a memfd mapped MAP_SHARED");
  if (shared != MAP_FAILED) {
    CHECK(!strata::device::shareable_host_region(shared, bytes), "a memfd mapping is not shareable before it is registered");
    CHECK_RESULT(ncclCommRegister(world, shared, bytes, &handle), ncclSuccess);
    CHECK(strata::device::shareable_host_region(shared, bytes) != nullptr,
          "ncclCommRegister registered shareable host memory with the communicator");
    auto* v = static_cast<float*>(shared);
    for (size_t i = 0; i < bytes / sizeof(float); ++i) v[i] = static_cast<float>(g_rank + 1);
    CHECK_RESULT(ncclAllReduce(v, v, bytes / sizeof(float), ncclFloat32, ncclSum, world, nullptr), ncclSuccess);
    CHECK(v[0] == g_size * (g_size + 1) / 2 && v[bytes / sizeof(float) - 1] == g_size * (g_size + 1) / 2,
          "all-reduce in registered memory");
    CHECK_RESULT(ncclCommDeregister(world, handle), ncclSuccess);
    CHECK(!strata::device::shareable_host_region(shared, bytes), "ncclCommDeregister released the registration");
    munmap(shared, bytes);
  }
  if (fd >= 0) close(fd);
  std::vector<char> private_memory(4096);
  CHECK_RESULT(ncclCommRegister(world, private_memory.data(), private_memory.size(), &handle), ncclSuccess);
  CHECK(!strata::device::shareable_host_region(private_memory.data(), 1), "private memory is not registered");
  CHECK_RESULT(ncclCommDeregister(world, handle), ncclSuccess);
  int stack = 0;
  CHECK_RESULT(ncclMemFree(&stack), ncclInvalidArgument);
  CHECK_RESULT(ncclMemAlloc(nullptr, 64), ncclInvalidArgument);
}

void bad_arguments(ncclComm_t world) {
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  const int n = g_size;
  // What every rank passes alike is refused on every rank, and the communicator goes on.
  CHECK_RESULT(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  CHECK_RESULT(ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(42), ncclSum, world, nullptr), ncclInvalidArgument);
  CHECK(last_error_has("ncclAllReduce"), "the last error names the function");
  CHECK_RESULT(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(42), world, nullptr), ncclInvalidArgument);
  CHECK_RESULT(ncclBroadcast(x, y, 4, ncclFloat32, n, world, nullptr), ncclInvalidArgument);
  CHECK_RESULT(ncclReduce(x, y, 4, ncclFloat32, ncclSum, -1, world, nullptr), ncclInvalidArgument);
  CHECK_RESULT(ncclGather(x, y, 1, ncclFloat32, n, world, nullptr), ncclInvalidArgument);
  ncclResult_t state = ncclInternalError;
  MUST(ncclCommGetAsyncError(world, &state));
  CHECK(state == ncclSuccess, "refused arguments leave no asynchronous error");
  check_works(world, n, g_rank, "after refused arguments");

  // Creation: refused before joining anyone.
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof zero);
  ncclComm_t c = nullptr;
  CHECK_RESULT(ncclCommInitRank(&c, 2, zero, 2), ncclInvalidArgument);
  CHECK_RESULT(ncclCommInitRank(&c, 0, zero, 0), ncclInvalidArgument);
  CHECK_RESULT(ncclCommInitRank(nullptr, 1, zero, 0), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CHECK_RESULT(ncclCommInitRankConfig(&c, 1, zero, 0, &cfg), ncclInvalidArgument);
  CHECK(last_error_has("NCCL_CONFIG_INITIALIZER"), "an uninitialised config is named");
  ncclConfig_t bad_blocking = NCCL_CONFIG_INITIALIZER;
  bad_blocking.blocking = 5;
  CHECK_RESULT(ncclCommInitRankConfig(&c, 1, zero, 0, &bad_blocking), ncclInvalidArgument);
  ncclConfig_t tiny = NCCL_CONFIG_INITIALIZER;
  tiny.size = 8;
  CHECK_RESULT(ncclCommInitRankConfig(&c, 1, zero, 0, &tiny), ncclInvalidArgument);
  ncclConfig_t ancient = NCCL_CONFIG_INITIALIZER;
  ancient.version = NCCL_VERSION(2, 13, 0);
  CHECK_RESULT(ncclCommInitRankConfig(&c, 1, zero, 0, &ancient), ncclInvalidArgument);
  CHECK(c == nullptr, "refused creations hand out no communicator");

  // A buffer fault is this rank's alone: on a one-rank communicator it stays usable.
  ncclComm_t solo = nullptr;
  MUST(ncclCommSplit(world, g_rank, 0, &solo, nullptr));
  CHECK_RESULT(ncclAllReduce(nullptr, y, 4, ncclFloat32, ncclSum, solo, nullptr), ncclInvalidArgument);
  CHECK_RESULT(ncclSend(x, 4, ncclFloat32, 0, solo, nullptr), ncclInvalidArgument);  // to itself, outside a group
  check_works(solo, 1, 0, "a one-rank communicator after refused buffers");
  MUST(ncclCommDestroy(solo));

  // Not implemented: ncclInvalidUsage, named.
  ncclWindow_t win = nullptr;
  CHECK_RESULT(ncclCommWindowRegister(world, x, sizeof x, &win, NCCL_WIN_DEFAULT), ncclInvalidUsage);
  CHECK(last_error_has("not implemented"), "an unimplemented call says so");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK_RESULT(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);

  const ncclResult_t codes[] = {ncclSuccess,         ncclUnhandledCudaError, ncclSystemError, ncclInternalError,
                                ncclInvalidArgument, ncclInvalidUsage,       ncclRemoteError, ncclInProgress};
  bool distinct = true;
  for (ncclResult_t a : codes)
    for (ncclResult_t b : codes) distinct &= a == b || std::strcmp(ncclGetErrorString(a), ncclGetErrorString(b)) != 0;
  CHECK(distinct, "ncclGetErrorString: one text per code");
}

// Rank 0 waits in an all-reduce the others never join; another thread aborts it.
void abort_stuck(ncclComm_t world) {
  ncclComm_t dup = nullptr;
  MUST(ncclCommSplit(world, 0, g_rank, &dup, nullptr));
  if (g_rank == 0) {
    float x = 1, y = 0;
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      CHECK_RESULT(ncclCommAbort(dup), ncclSuccess);
    });
    const double t0 = harness_now();
    const ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, dup, nullptr);
    const double waited = harness_now() - t0;
    aborter.join();
    CHECK(r != ncclSuccess, "the stuck all-reduce fails once aborted");
    CHECK(waited < 5, "the stuck all-reduce returns promptly after ncclCommAbort");
    CHECK_RESULT(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, dup, nullptr), ncclInvalidArgument);  // gone
  }
  barrier(world);
  if (g_rank != 0) {
    // The first call may still complete with what rank 0 had sent; by the third, rank 0 is
    // known gone, and named.
    ncclResult_t r = ncclSuccess;
    float x = 1, y = 0;
    for (int i = 0; i < 3 && r == ncclSuccess; ++i) r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, dup, nullptr);
    CHECK_RESULT(r, ncclRemoteError);
    CHECK(last_error_has("rank 0"), "the aborted rank is named");
    ncclResult_t state = ncclSuccess;
    MUST(ncclCommGetAsyncError(dup, &state));
    CHECK(state == ncclRemoteError, "the broken communicator reports ncclRemoteError");
    CHECK_RESULT(ncclCommAbort(dup), ncclSuccess);
  }
  barrier(world);
}

// The last rank aborts its copy of the communicator; the others shrink it away.
void shrink(ncclComm_t world) {
  ncclComm_t dup = nullptr;
  MUST(ncclCommSplit(world, 0, g_rank, &dup, nullptr));
  const int last = g_size - 1;
  if (g_rank == last) {
    MUST(ncclCommAbort(dup));
  } else {
    int exclude[1] = {last};
    ncclComm_t shrunk = nullptr;
    CHECK_RESULT(ncclCommShrink(dup, exclude, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT), ncclSuccess);
    if (shrunk) {
      check_works(shrunk, g_size - 1, g_rank, "shrunk without the last rank");
      MUST(ncclCommDestroy(shrunk));
    }
    CHECK_RESULT(ncclCommDestroy(dup), ncclSuccess);
  }
  barrier(world);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: semantics_check ID_FILE (under strata-run or mpirun)\n");
    return 2;
  }
  // The world communicator from a config as NCCL 2.18's header laid it out: the fields
  // after splitShare are not there, and must not be read.
  const ncclUniqueId id = harness_world_id(argv[1]);
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, splitShare) + sizeof(int);
  old.version = NCCL_VERSION(2, 18, 0);
  old.blocking = 1;
  old.trafficClass = 12345;  // beyond `size`: garbage Strata must not look at
  ncclComm_t world = nullptr;
  MUST(ncclCommInitRankConfig(&world, g_size, id, g_rank, &old));

  queries(world);
  creation(world);
  splits(world);
  groups(world);
  premul(world);
  fp8(world);
  memory(world);
  bad_arguments(world);
  abort_stuck(world);
  shrink(world);

  float x = 1, y = 0;
  CHECK_RESULT(ncclCommFinalize(world), ncclSuccess);
  CHECK_RESULT(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, world, nullptr), ncclInvalidUsage);
  CHECK_RESULT(ncclCommDestroy(world), ncclSuccess);
  CHECK_RESULT(ncclCommDestroy(world), ncclInvalidArgument);
  return harness_report("semantics_check");
}
