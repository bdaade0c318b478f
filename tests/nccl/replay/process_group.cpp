#include "process_group.hpp"

#include <sched.h>
#include <sys/stat.h>

#include <chrono>

#include "deadline.hpp"
#include "harness.h"

namespace replay {

namespace {
constexpr int kPriorities = 4;          // stream pools: 4 priorities ...
constexpr int kStreamsPerPool = 32;     // ... of 32 streams (c10/cuda/CUDAStream.cpp)
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);
constexpr auto kHeartbeatPeriod = std::chrono::seconds(1);
}  // namespace

ProcessGroup::ProcessGroup(strata::device::Backend& gpu, const char* id_file, GroupOptions o)
    : gpu_(gpu), id_file_(id_file), o_(o) {
  int version = 0;
  check(ncclGetVersion(&version), "ncclGetVersion");
  if (o_.watchdog) {
    watchdog_ = std::thread([this] {
      heartbeat_ = std::thread([this] { heartbeat_loop(); });  // the watchdog's first act
      watchdog_loop();
    });
  }
  if (o_.init == Init::eager) make_comm();  // init_process_group(device_id=...)
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard lk(stop_m_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (comm_) {
    step("ncclCommDestroy");
    check(ncclCommDestroy(comm_), "ncclCommDestroy");
  }
}

void ProcessGroup::check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::string why = std::string(what) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")";
  std::fprintf(stderr, "rank %d: %s\n", g_rank, why.c_str());
  std::lock_guard lk(failure_m_);
  if (failure_.empty()) failure_ = why;
}

std::string ProcessGroup::failure() const {
  std::lock_guard lk(failure_m_);
  return failure_;
}

void ProcessGroup::make_comm() {
  step("communicator: unique id");
  const ncclUniqueId id = harness_world_id(id_file_.c_str());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = o_.init == Init::nonblocking ? 0 : 1;
  step("communicator: ncclCommInitRankConfig");
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, g_size, id, g_rank, &config);
  if (r != ncclInProgress) check(r, "ncclCommInitRankConfig");
  std::lock_guard lk(comm_m_);
  comm_ = c;
}

ncclComm_t ProcessGroup::comm() {
  if (!comm_) make_comm();
  if (o_.init == Init::nonblocking) {
    // NCCLComm::waitReady: ncclCommGetAsyncError until the creation is over.
    for (;;) {
      ncclResult_t state = ncclSuccess;
      {
        std::lock_guard lk(comm_m_);
        check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      }
      if (state != ncclInProgress) {
        check(state, "the non-blocking communicator's creation");
        break;
      }
      sched_yield();
    }
  }
  return comm_;
}

Stream ProcessGroup::pool_stream() {
  if (pool_.empty()) {
    step("getStreamFromPool: 4 x 32 streams");
    for (int i = 0; i < kPriorities * kStreamsPerPool; ++i) pool_.push_back(gpu_.execution().stream_create());
  }
  return pool_[0];
}

void ProcessGroup::collective(const char* name, const NcclCall& call, const std::function<void(Stream)>& after) {
  auto& ex = gpu_.execution();
  const std::string what = name;
  step(what + ": cudaStreamIsCapturing");
  if (ex.stream_capturing(nullptr)) check(ncclInvalidUsage, "the current stream is capturing");
  ncclComm_t c = comm();
  Stream pool = pool_stream();
  step(what + ": the pool stream waits for the current stream");
  if (!nccl_event_) nccl_event_ = ex.event_create();
  ex.event_record(nccl_event_, nullptr);
  ex.stream_wait(pool, nccl_event_);
  step(what + ": the NCCL call on the pool stream");
  check(call(c, static_cast<cudaStream_t>(pool)), name);
  if (after) {
    step(what + ": copies on the pool stream after the call");
    after(pool);
  }
  step(what + ": the end event (made at its first record) recorded on the pool stream");
  Event end = nullptr;
  {
    std::lock_guard lk(cache_m_);
    if (!event_cache_.empty()) {
      end = event_cache_.back();
      event_cache_.pop_back();
    }
  }
  if (!end) end = ex.event_create();
  ex.event_record(end, pool);
  step(what + ": workEnqueue (the watchdog's mutex)");
  if (o_.watchdog) {
    std::lock_guard lk(work_m_);
    works_.push_back(end);
  }
  step(what + ": Work::wait");
  ex.stream_wait(nullptr, end);  // the current stream waits for the end event
  if (!o_.watchdog) {
    // TORCH_NCCL_BLOCKING_WAIT: the host polls the end event every 1 ms.
    while (!ex.event_query(end)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lk(cache_m_);
    event_cache_.push_back(end);
  }
}

void ProcessGroup::on_current_stream(const char* name, const NcclCall& call) {
  step(std::string(name) + ": cudaStreamIsCapturing");
  if (gpu_.execution().stream_capturing(nullptr)) check(ncclInvalidUsage, "the current stream is capturing");
  ncclComm_t c = comm();
  step(std::string(name) + ": the NCCL call on the current stream");
  check(call(c, nullptr), name);
}

void ProcessGroup::watchdog_loop() {
  auto& ex = gpu_.execution();
  std::unique_lock stop_lk(stop_m_);
  while (!stop_cv_.wait_for(stop_lk, kWatchdogPeriod, [&] { return stop_.load(); })) {
    std::lock_guard lk(work_m_);  // the whole scan, as PyTorch holds workMetaListMutex_
    for (auto it = works_.begin(); it != works_.end();) {
      ncclResult_t async = ncclSuccess;
      {
        std::lock_guard ck(comm_m_);
        if (comm_) check(ncclCommGetAsyncError(comm_, &async), "watchdog: ncclCommGetAsyncError");
      }
      if (async != ncclSuccess && async != ncclInProgress) check(async, "watchdog: the communicator's async error");
      if (ex.event_query(*it)) {
        std::lock_guard cl(cache_m_);
        event_cache_.push_back(*it);
        it = works_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void ProcessGroup::heartbeat_loop() {
  std::unique_lock stop_lk(stop_m_);
  while (!stop_cv_.wait_for(stop_lk, kHeartbeatPeriod, [&] { return stop_.load(); })) {
    struct stat st {};
    (void)::stat(id_file_.c_str(), &st);  // the store's dump-key check: no CUDA
  }
}

}  // namespace replay
