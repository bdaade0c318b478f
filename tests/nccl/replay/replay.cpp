// PyTorch's DDP over ProcessGroupNCCL, replayed against our libnccl.so.2 without PyTorch:
// the calls, threads, streams, events and blocking calls of `init_process_group("nccl")`,
// `DDP(model)` and a few training steps (/work/shared/research/pytorch-nccl-pattern.md,
// section 4), on the device backend under test: the CUDA runtime on a GPU
// (STRATA_DEVICE=cuda, tools/gpu-check), the emulated backend in CI, which blocks as CUDA
// does (docs/device.md, "Blocking rules"), so that what would hang a GPU hangs or fails here.
//
//   replay ID_FILE [VARIANT] [--steps N] [--deadline SECONDS]
//   replay --list      (the variants, one a line)
//
// Variants (docs/nccl.md, "The replay of PyTorch's calls"): base (PyTorch's defaults: the
// tensors in one cudaMalloc segment, lazy creation, the watchdog), per_tensor (a cudaMalloc
// per tensor), blocker_<b> (after every collective the main thread also blocks in <b>:
// pinned_d2h, pageable_d2h, pageable_h2d, pinned_alloc, device_alloc), eager, nonblocking,
// no_watchdog. Each step has a deadline; a step past it names the variant, rank and step
// (deadline.hpp). The results are checked against what each rank computes alone.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "harness.h"
#include "process_group.hpp"

namespace replay {
namespace {

enum class Blocker { none, pinned_d2h, pageable_d2h, pageable_h2d, pinned_alloc, device_alloc };

struct Variant {
  const char* name;
  bool per_tensor = false;
  Blocker blocker = Blocker::none;
  GroupOptions group;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"base"},
      {"per_tensor", true},
      {"blocker_pinned_d2h", false, Blocker::pinned_d2h},
      {"blocker_pageable_d2h", false, Blocker::pageable_d2h},
      {"blocker_pageable_h2d", false, Blocker::pageable_h2d},
      {"blocker_pinned_alloc", false, Blocker::pinned_alloc},
      {"blocker_device_alloc", false, Blocker::device_alloc},
      {"eager", false, Blocker::none, {Init::eager, true}},
      {"nonblocking", false, Blocker::none, {Init::nonblocking, true}},
      {"no_watchdog", false, Blocker::none, {Init::lazy, false}},
  };
  return v;
}

constexpr size_t kSegment = 2 << 20;  // the caching allocator's small-pool segment
constexpr size_t kAlign = 512;        // its block alignment
const size_t kParams[] = {512, 32, 128, 4};  // floats per parameter
constexpr size_t kParamTotal = 676;
constexpr size_t kMeta = 12;  // int64 of the shape metadata

// Device tensors the way the caching allocator hands them out: all inside one cudaMalloc
// segment (PyTorch's default for small tensors), or each in a segment of its own.
class Tensors {
 public:
  Tensors(strata::device::ProgramCalls& program, bool per_tensor) : program_(program), per_tensor_(per_tensor) {
    if (!per_tensor) segments_.push_back(program.device_malloc(kSegment));
  }
  ~Tensors() {
    for (void* s : segments_) program_.device_free(s);
  }
  char* make(size_t bytes) {
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (per_tensor_) {
      segments_.push_back(program_.device_malloc(rounded));
      return static_cast<char*>(segments_.back());
    }
    if (used_ + rounded > kSegment) std::abort();
    char* p = static_cast<char*>(segments_[0]) + used_;
    used_ += rounded;
    return p;
  }

 private:
  strata::device::ProgramCalls& program_;
  bool per_tensor_;
  std::vector<void*> segments_;
  size_t used_ = 0;
};

float param_value(int rank, size_t i) { return static_cast<float>(i % 97) * 0.5f + static_cast<float>(rank) * 1000.0f; }

struct Replay {
  strata::device::Backend& gpu;
  const Variant& v;
  int steps;
  strata::device::Execution& ex = gpu.execution();
  strata::device::ProgramCalls& program = gpu.program();
  Tensors tensors{program, v.per_tensor};
  void* pinned = nullptr;  // the CachingHostAllocator's first block
  std::vector<void*> extra_pinned, extra_device;

  // A synchronous copy on the current stream, as ATen's copy_(non_blocking=false).
  void copy_and_sync(void* dst, const void* src, size_t bytes) {
    ex.copy(dst, src, bytes, nullptr);
    ex.stream_synchronize(nullptr);
  }
  // `.item()`: a pinned buffer (the first cudaHostAlloc of the process), D2H, synchronize.
  template <typename T>
  T item(const void* d) {
    if (!pinned) {
      step("the first cudaHostAlloc (CachingHostAllocator)");
      pinned = program.host_malloc(4096);
    }
    step(".item(): a copy to pinned memory and a synchronize");
    copy_and_sync(pinned, d, sizeof(T));
    T v;
    std::memcpy(&v, pinned, sizeof v);
    return v;
  }

  // The variant's blocking call while the collective just issued may hold its streams.
  void block(const char* after, void* device_scratch) {
    if (v.blocker == Blocker::none) return;
    step(std::string("blocker after ") + after);
    char host[64] = {};
    switch (v.blocker) {
      case Blocker::pinned_d2h: {
        void* p = program.host_malloc(64);
        extra_pinned.push_back(p);
        copy_and_sync(p, device_scratch, 64);
        break;
      }
      case Blocker::pageable_d2h: copy_and_sync(host, device_scratch, sizeof host); break;
      case Blocker::pageable_h2d: copy_and_sync(device_scratch, host, sizeof host); break;
      case Blocker::pinned_alloc: extra_pinned.push_back(program.host_malloc(4096)); break;
      case Blocker::device_alloc: extra_device.push_back(program.device_malloc(kSegment)); break;
      case Blocker::none: break;
    }
  }

  ~Replay() {
    for (void* p : extra_pinned) program.host_free(p);
    for (void* p : extra_device) program.device_free(p);
    if (pinned) program.host_free(pinned);
  }

  void run(const char* id_file) {
    step("the process group (ncclGetVersion, the watchdog)");
    ProcessGroup pg(gpu, id_file, v.group);
    char* blocker_scratch = tensors.make(64);

    // model.cuda(): each parameter a pageable copy on the current stream and a synchronize.
    step("model.cuda(): the parameters");
    std::vector<char*> params;
    for (size_t n : kParams) {
      std::vector<float> host(n);
      for (size_t i = 0; i < n; ++i) host[i] = param_value(g_rank, params.size() * 1000 + i);
      params.push_back(tensors.make(n * sizeof(float)));
      copy_and_sync(params.back(), host.data(), n * sizeof(float));
    }

    // Collective 1: the all-gather of the parameter count (here 10 + rank, so that each
    // rank's place is checked), then .item() of the results.
    step("the parameter count");
    char* count = tensors.make(sizeof(int64_t));
    const int64_t mine = 10 + g_rank;
    copy_and_sync(count, &mine, sizeof mine);
    char* gathered = tensors.make(g_size * sizeof(int64_t));
    std::vector<char*> outs;
    for (int r = 0; r < g_size; ++r) outs.push_back(tensors.make(sizeof(int64_t)));
    pg.collective(
        "ncclAllGather (parameter count)",
        [&](ncclComm_t c, cudaStream_t s) { return ncclAllGather(count, gathered, 1, ncclInt64, c, s); },
        [&](Stream pool) {
          for (int r = 0; r < g_size; ++r) ex.copy(outs[r], gathered + r * sizeof(int64_t), sizeof(int64_t), pool);
        });
    block("the all-gather", blocker_scratch);
    for (int r = 0; r < g_size; ++r) CHECK(item<int64_t>(outs[r]) == 10 + r, "all-gathered parameter count");

    // Collective 2: the shape metadata, broadcast in place, read into pageable memory.
    step("the metadata (a pageable copy in)");
    char* meta = tensors.make(kMeta * sizeof(int64_t));
    std::vector<int64_t> m(kMeta);
    for (size_t i = 0; i < kMeta; ++i) m[i] = g_rank == 0 ? 100 + static_cast<int64_t>(i) : 7 * g_rank + i;
    copy_and_sync(meta, m.data(), kMeta * sizeof(int64_t));
    pg.collective("ncclBcast (metadata)", [&](ncclComm_t c, cudaStream_t s) { return ncclBcast(meta, kMeta, ncclInt64, 0, c, s); });
    block("the metadata broadcast", blocker_scratch);
    step("the metadata: a copy to pageable memory");
    std::vector<int64_t> got(kMeta);
    copy_and_sync(got.data(), meta, kMeta * sizeof(int64_t));
    for (size_t i = 0; i < kMeta; ++i) CHECK(got[i] == 100 + static_cast<int64_t>(i), "broadcast metadata");

    // Collective 3: the module state, flattened by a kernel (at::cat: its module loads at
    // its first launch), broadcast, copied back; then the batch, a pageable copy in.
    step("the module state: at::cat (a kernel's first launch)");
    char* flat = tensors.make(kParamTotal * sizeof(float));
    size_t at = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      program.kernel_copy(flat + at, params[k], kParams[k] * sizeof(float), nullptr);
      at += kParams[k] * sizeof(float);
    }
    pg.collective("ncclBcast (module state)",
                  [&](ncclComm_t c, cudaStream_t s) { return ncclBcast(flat, kParamTotal, ncclFloat, 0, c, s); });
    block("the module broadcast", blocker_scratch);
    step("the module state: copies back on the current stream");
    at = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      ex.copy(params[k], flat + at, kParams[k] * sizeof(float), nullptr);
      at += kParams[k] * sizeof(float);
    }
    step("the batch: a pageable copy in");
    char* batch = tensors.make(80 * sizeof(float));
    std::vector<float> x(80, 1.0f);
    copy_and_sync(batch, x.data(), x.size() * sizeof(float));
    for (size_t k = 0; k < params.size(); ++k) {
      std::vector<float> p(kParams[k]);
      copy_and_sync(p.data(), params[k], p.size() * sizeof(float));
      bool same = true;
      for (size_t i = 0; i < p.size(); ++i) same = same && p[i] == param_value(0, k * 1000 + i);
      CHECK(same, "parameters equal to rank 0's after DDP's broadcast");
    }

    // Training steps: the gradient bucket's all-reduce on the pool stream, then
    // all_reduce(loss, AVG) without async_op on the current stream, and loss.item().
    char* grad = tensors.make(kParamTotal * sizeof(float));
    char* loss = tensors.make(sizeof(float));
    for (int s = 0; s < steps; ++s) {
      const std::string name = "step " + std::to_string(s + 1);
      step(name + ": the gradients (a pageable copy in)");
      std::vector<float> g(kParamTotal);
      for (size_t i = 0; i < kParamTotal; ++i) g[i] = static_cast<float>((g_rank + 1) * (i % 7 + 1) + s);
      copy_and_sync(grad, g.data(), g.size() * sizeof(float));
      pg.collective("ncclAllReduce (gradient bucket)", [&](ncclComm_t c, cudaStream_t st) {
        return ncclAllReduce(grad, grad, kParamTotal, ncclFloat, ncclSum, c, st);
      });
      block("the gradient all-reduce", blocker_scratch);
      const float l = static_cast<float>(g_rank + 1 + s);
      step(name + ": the loss (a pageable copy in)");
      copy_and_sync(loss, &l, sizeof l);
      pg.on_current_stream("ncclAllReduce (loss, avg)", [&](ncclComm_t c, cudaStream_t st) {
        return ncclAllReduce(loss, loss, 1, ncclFloat, ncclAvg, c, st);
      });
      const float mean = item<float>(loss);
      CHECK(mean == static_cast<float>(g_size + 1) / 2 + s, "the averaged loss");
      step(name + ": the gradients (a copy to pageable memory)");
      copy_and_sync(g.data(), grad, g.size() * sizeof(float));
      bool right = true;
      for (size_t i = 0; i < kParamTotal; ++i)
        right = right && g[i] == static_cast<float>(g_size * (g_size + 1) / 2 * (i % 7 + 1) + g_size * s);
      CHECK(right, "the all-reduced gradients");
    }
    const std::string failed = pg.failure();
    if (!failed.empty()) std::fprintf(stderr, "replay %s rank %d: %s\n", v.name, g_rank, failed.c_str());
    CHECK(failed.empty(), "no NCCL call or the watchdog met an error");
    step("destroy");
  }
};

}  // namespace
}  // namespace replay

int main(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--list")) {
    for (const auto& c : replay::variants()) std::printf("%s\n", c.name);
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: replay ID_FILE [VARIANT] [--steps N] [--deadline SECONDS] | replay --list\n");
    return 2;
  }
  std::string name = "base";
  int steps = 10;
  double deadline = 30;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--deadline") && i + 1 < argc) deadline = std::atof(argv[++i]);
    else name = argv[i];
  }
  const replay::Variant* v = nullptr;
  for (const auto& c : replay::variants())
    if (name == c.name) v = &c;
  if (!v) {
    std::fprintf(stderr, "replay: no variant %s; variants:", name.c_str());
    for (const auto& c : replay::variants()) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  harness_rank_from_env();
  replay::start_deadlines(v->name, g_rank, deadline);
  strata::device::Backend* gpu = strata::device::backend();
  if (!gpu) {
    std::fprintf(stderr, "replay: no device backend (STRATA_DEVICE=cuda on a GPU, emulated elsewhere)\n");
    return 2;
  }
  {
    replay::Replay r{*gpu, *v, steps};
    r.run(argv[1]);
  }
  replay::stop_deadlines();
  return harness_report((std::string("replay ") + v->name).c_str());
}
