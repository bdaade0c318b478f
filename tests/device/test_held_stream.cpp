// The premise of a device call's worker (src/core/stream_order): while a call holds the
// user's stream (wait_value on a flag the worker raises when done), the user's thread may
// block on that stream, in a copy to pageable memory (what torch's .cpu() does), a
// synchronize or a free, and the worker must still get its driver calls through. On an
// H200 some did not: cuStreamCreate waited for a lock the blocked pageable copy kept
// (docs/gpu.md).
//
// Each probe is a fresh process (this binary in the --held-stream role): its user stream
// is held, its main thread blocks on it, and a worker thread makes one driver call (then
// records and waits for an event, as the executor does) before it releases the stream.
// The calls a worker makes must get through; those that may wait for the blocked thread
// are exactly the ones device::StreamsHeld refuses, so a worker never makes them (it also
// refuses free, which waits for the whole device as cudaFree does: not probed, it would
// hang every backend).
//
// The legacy IPC path of memory a program allocated itself (PyTorch's cudaMalloc) is probed
// too: a pointer query inside such an allocation, its export, an import and an unimport of
// a legacy handle. On a GPU the probe measures whether they wait (the importing ones need a
// second process there, so on CUDA they only show whether the call throws). On the
// emulated backend the result must be exactly its blocking rules' (docs/device.md): a call
// that needs the context lock, while the user's thread blocks in a call that holds it,
// gives up after STRATA_EMULATED_LOCK_WAIT saying a GPU would hang; everything else gets
// through.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "ground/device/emulated/backend.hpp"
#include "ground/device/ipc_handle.hpp"
#include "process_roles.hpp"

namespace strata_test {

namespace {

using strata::device::Event;
using strata::device::Stream;

constexpr size_t kBytes = 1 << 20;
constexpr int kRefused = 3;  // the probe's exit code when the call threw (not a hang)

constexpr int kLockWait = 4;  // the emulated backend's context lock gave up (a GPU would hang)

struct Probe {
  Stream work;
  Event ev;
  void* a;
  void* c;
  void* pinned;
  void* foreign;   // a program's cudaMalloc (ProgramCalls::device_malloc)
  void* imported;  // this process's own legacy handle of it, imported (emulated only)
  uint64_t* flag;  // pinned; [0] holds the user's stream, [1] is the probes' own
  strata::device::IpcHandle a_handle;        // a's, exported by the main thread
  strata::device::IpcHandle foreign_handle;  // foreign's (legacy), exported by the main thread
};

struct Call {
  const char* name;
  bool refused_while_held;  // by device::StreamsHeld (ground/device/backend.hpp): it needs the context lock
  std::function<void(Probe&)> make;
};

const std::vector<Call>& calls() {
  using strata::DataType;
  using strata::ReduceOp;
  static const std::vector<Call> k = {
      {"nothing", false, [](Probe&) {}},
      {"reduce_kernel", false,
       [](Probe& p) {
         const void* srcs[2] = {p.a, p.c};
         dev().execution().reduce(p.c, srcs, 2, kBytes / 4, DataType::float32, ReduceOp::sum, p.work);
       }},
      {"finalize_kernel", false,
       [](Probe& p) { dev().execution().finalize(p.c, kBytes / 4, DataType::float32, ReduceOp::avg, 3, p.work); }},
      {"copy_device", false, [](Probe& p) { dev().execution().copy(p.c, p.a, kBytes, p.work); }},
      {"copy_to_pinned", false, [](Probe& p) { dev().execution().copy(p.pinned, p.a, kBytes, p.work); }},
      {"copy_from_pinned", false, [](Probe& p) { dev().execution().copy(p.c, p.pinned, kBytes, p.work); }},
      {"memset", false, [](Probe& p) { dev().execution().memset(p.c, 0, kBytes, p.work); }},
      {"write_and_wait_value", false,
       [](Probe& p) {
         dev().execution().write_value(p.work, &p.flag[1], 1);
         dev().execution().wait_value(p.work, &p.flag[1], 1);
       }},
      {"stream_wait_event", false,
       [](Probe& p) {
         dev().execution().event_record(p.ev, p.work);
         dev().execution().stream_wait(p.work, p.ev);
       }},
      {"event_query", false,
       [](Probe& p) {
         dev().execution().event_record(p.ev, p.work);
         while (!dev().execution().event_query(p.ev)) std::this_thread::yield();
       }},
      {"stream_synchronize", false, [](Probe& p) { dev().execution().stream_synchronize(p.work); }},
      {"alloc", false, [](Probe&) { (void)dev().memory().alloc(kBytes); }},  // kept: a free waits for every stream
      {"query", false, [](Probe& p) { (void)dev().memory().query(p.a); }},
      {"export_handle", false, [](Probe& p) { (void)dev().memory().export_handle(p.a); }},
      // Mapping a peer's buffer, as a link does on its first use. Here the handle is this
      // process's own: a backend may refuse that (exit 3), which is not a hang.
      {"import_handle", false, [](Probe& p) { (void)dev().memory().import_handle(p.a_handle); }},
      {"copy_foreign", false,
       [](Probe& p) { dev().execution().copy(p.c, static_cast<char*>(p.foreign) + 4096, kBytes / 2, p.work); }},
      {"stream_create", true, [](Probe&) { (void)dev().execution().stream_create(); }},
      {"event_create", true, [](Probe&) { (void)dev().execution().event_create(); }},
      {"host_alloc", true, [](Probe&) { (void)dev().memory().host_alloc(kBytes); }},
      // The legacy IPC path (cuPointerGetAttributes, cudaIpcGetMemHandle, cudaIpcOpenMemHandle,
      // cudaIpcCloseMemHandle): needing the lock is the emulated model's assumption, not yet
      // measured on a GPU.
      {"query_foreign", true, [](Probe& p) { (void)dev().memory().query(static_cast<char*>(p.foreign) + 4096); }},
      {"export_foreign", true, [](Probe& p) { (void)dev().memory().export_handle(p.foreign); }},
      {"import_legacy", true, [](Probe& p) { (void)dev().memory().import_handle(p.foreign_handle); }},
      {"unimport_legacy", true,
       [](Probe& p) {
         if (!p.imported) throw strata::InvalidUsage("no legacy import to drop (CUDA opens no handle of its own process)");
         dev().memory().unimport(p.imported);
       }},
  };
  return k;
}

// How the user's thread blocks on its held stream: a copy to or from pageable memory, a
// synchronize, a free (which waits for the whole device, as cudaFree does), what PyTorch
// does with a collective's result (the default stream, CUDA's legacy stream, waits for the
// held one, and a copy to pageable memory on it), and a program's first pinned or device
// allocation (cudaHostAlloc, cudaMalloc; the emulated backend synchronizes the device for
// them, as the CUDA guide's implicit synchronization allows). Whether the emulated model
// has it keep the context lock while it waits (all but synchronize).
struct Blocker {
  const char* name;
  bool holds_lock;
};
const Blocker kBlockers[] = {{"pageable_copy", true},   {"pageable_h2d", true},       {"synchronize", false},
                             {"free", true},            {"default_stream_copy", true}, {"program_host_alloc", true},
                             {"program_malloc", true}};

int held_stream_probe(const std::string& call_name, const std::string& blocker) {
  const Call* call = nullptr;
  for (const Call& c : calls())
    if (call_name == c.name) call = &c;
  bool holds_lock = false;
  for (const Blocker& b : kBlockers)
    if (blocker == b.name) holds_lock = b.holds_lock;
  if (!call) return 2;
  auto& ex = dev().execution();
  auto& mem = dev().memory();
  Probe p;
  p.work = ex.stream_create();
  p.ev = ex.event_create();
  Event done = ex.event_create(), held = ex.event_create();
  p.a = mem.alloc(kBytes);
  p.c = mem.alloc(kBytes);
  p.pinned = mem.host_alloc(kBytes);
  p.flag = static_cast<uint64_t*>(mem.host_alloc(4096));
  p.flag[0] = p.flag[1] = 0;
  std::vector<uint8_t> sent(kBytes), got(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) sent[i] = static_cast<uint8_t>(i * 13 + (i >> 10));
  upload(p.a, sent.data(), kBytes);
  p.a_handle = mem.export_handle(p.a);
  p.foreign = dev().program().device_malloc(2 * kBytes);
  p.foreign_handle = mem.export_handle(p.foreign);
  p.imported = nullptr;
  if (on_emulated()) p.imported = mem.import_handle(p.foreign_handle);
  Stream user = ex.stream_create();
  ex.wait_value(user, &p.flag[0], 1);
  enum class Refusal { none, lock, other } refused = Refusal::none;
  std::thread worker([&] {
    // By then the user's thread is inside its blocking call (if it is not, the probe is
    // weaker, never wrong). The emulated backend says when its lock is held: there the
    // probe waits for that, so that its verdict does not depend on a busy machine's timing.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (on_emulated() && holds_lock)
      for (int i = 0; i < 10000 && !strata::device::emulated::context_lock_held(dev()); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::printf("worker: %s\n", call->name);
    std::fflush(stdout);
    try {
      call->make(p);
    } catch (const std::exception& e) {
      std::printf("worker: refused: %s\n", e.what());
      refused = std::strstr(e.what(), "emulated CUDA context lock") ? Refusal::lock : Refusal::other;
    }
    ex.event_record(done, p.work);
    ex.event_synchronize(done);
    std::printf("worker: done\n");
    std::fflush(stdout);
    __atomic_store_n(&p.flag[0], 1, __ATOMIC_RELEASE);
  });
  void* spare = mem.alloc(kBytes);
  void* program_memory = nullptr;
  if (blocker == "pageable_copy") ex.copy(got.data(), p.a, kBytes, user);
  if (blocker == "pageable_h2d") ex.copy(p.c, sent.data(), kBytes, user);
  if (blocker == "free") mem.free(spare);
  if (blocker == "program_host_alloc") program_memory = dev().program().host_malloc(kBytes);
  if (blocker == "program_malloc") program_memory = dev().program().device_malloc(kBytes);
  if (blocker == "default_stream_copy") {
    ex.event_record(held, user);
    ex.stream_wait(nullptr, held);
    ex.copy(got.data(), p.a, kBytes, nullptr);
    ex.stream_synchronize(nullptr);
  }
  ex.stream_synchronize(user);
  worker.join();
  if (blocker == "program_host_alloc") dev().program().host_free(program_memory);
  if (blocker == "program_malloc") dev().program().device_free(program_memory);
  if ((blocker == "pageable_copy" || blocker == "default_stream_copy") && got != sent) {
    std::printf("held-stream: the pageable copy read wrong bytes\n");
    return 1;
  }
  std::printf("held-stream: ok\n");
  return refused == Refusal::lock ? kLockWait : refused == Refusal::other ? kRefused : 0;
}

}  // namespace

int held_stream_role(int argc, char** argv) {
  if (argc < 4) return 2;
  try {
    return held_stream_probe(argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::printf("held-stream: %s\n", e.what());
    return 1;
  }
}

namespace {

// All probes at once, each its own process (a driver's locks are per process), so a hung
// one costs the deadline once, not once per probe.
TEST(HeldStream, AWorkersDriverCallsGetThroughWhileTheUsersThreadBlocksOnTheHeldStream) {
  std::vector<strata_test::SpawnSpec> specs;
  std::vector<std::pair<const Call*, const Blocker*>> what;
  for (const Call& c : calls())
    for (const Blocker& b : kBlockers) {
      // The program's allocations as blockers: against the calls that need the lock and a
      // baseline, so a GPU makes fewer contexts.
      const bool program_blocker = std::strncmp(b.name, "program_", 8) == 0;
      if (program_blocker && !c.refused_while_held && std::strcmp(c.name, "nothing") != 0) continue;
      specs.push_back(role_spec("--held-stream", {c.name, b.name}, {{"STRATA_EMULATED_LOCK_WAIT", "1"}}));
      what.emplace_back(&c, &b);
    }
  // About 120 processes at once: on a GPU, as many contexts to create.
  const std::vector<ProcResult> results = run_all(specs, 45);
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [call, blocker] = what[i];
    const ProcResult& r = results[i];
    const bool lock_wait = r.exited && r.exit_code == kLockWait;
    const bool through = r.exited && (r.exit_code == 0 || r.exit_code == kRefused);
    std::printf("  %-22s while the user's thread blocks in %-19s: %s\n", call->name, blocker->name,
                lock_wait                    ? "waits for the context lock (a GPU would hang)"
                : !through                   ? (r.killed_by_deadline ? "HUNG" : "failed")
                : r.exit_code == kRefused ? "through (the call threw)"
                                          : "through");
    if (on_emulated()) {
      // Exactly the model's rules.
      const bool waits = call->refused_while_held && blocker->holds_lock;
      EXPECT_EQ(lock_wait, waits) << call->name << " while the user's thread blocks in " << blocker->name << ": "
                                  << r.describe() << "\n"
                                  << tail(r.out, 2000);
      if (!waits) EXPECT_TRUE(r.exited && r.exit_code == 0) << call->name << " / " << blocker->name << ": " << r.describe()
                                                           << "\n" << tail(r.out, 2000);
      continue;
    }
    if (call->refused_while_held && r.killed_by_deadline) continue;  // a worker never makes it
    EXPECT_TRUE(through) << call->name << " made by a worker while the user's thread blocks in " << blocker->name
                         << ": " << r.describe() << "\n"
                         << tail(r.out, 2000);
  }
}

}  // namespace
}  // namespace strata_test
