// The CUDA device backend (libstrata-cuda.so, loaded by ground/device/backend.cpp only
// where a driver and a GPU exist). Thin: device memory through the driver's cuMem API
// with POSIX-fd handles (so every allocation can be exported), legacy cudaIpc handles for
// device memory someone else allocated, pinned host memory as memfd pages registered with
// the device, the runtime's streams and events, the functors' kernels (kernels.cu), and
// cuStreamWriteValue64 / cuStreamWaitValue64 for the stream memory operations. The device
// is the calling thread's current one when the backend is made.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "ground/device/backend.hpp"
#include "ground/device/cuda/check.hpp"
#include "ground/device/cuda/kernels.hpp"
#include "ground/device/memfd_regions.hpp"
#include "ground/device/range_map.hpp"

namespace strata::device::cuda {

namespace {

// A device allocation made or imported here.
struct DeviceRegion {
  void* base = nullptr;
  size_t length = 0;
  uint64_t id = 0;
  Origin origin = Origin::allocated;
  CUmemGenericAllocationHandle handle = 0;  // 0: a legacy cudaIpc import
};
using DeviceRef = std::shared_ptr<const DeviceRegion>;

constexpr uint64_t kForeignIdBit = 1ull << 63;  // ids of memory we did not allocate: CUDA's buffer id

class CudaMemory final : public Memory {
 public:
  explicit CudaMemory(int ordinal) : ordinal_(ordinal) {
    check(cuDeviceGet(&cu_device_, ordinal), "cuDeviceGet");
    int vmm = 0, fd_handles = 0;
    check(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_device_),
          "cuDeviceGetAttribute");
    if (!vmm) throw SystemError("cuda backend: this GPU does not support the cuMem virtual memory API");
    check(
        cuDeviceGetAttribute(&fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cu_device_),
        "cuDeviceGetAttribute");
    fd_handles_ = fd_handles != 0;
    CUmemAllocationProp prop = properties();
    check(cuMemGetAllocationGranularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity");
  }

  void* alloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    bind();
    const size_t length = (bytes + granularity_ - 1) / granularity_ * granularity_;
    CUmemAllocationProp prop = properties();
    CUmemGenericAllocationHandle h = 0;
    check(cuMemCreate(&h, length, &prop, 0), "cuMemCreate");
    return map(h, length, Origin::allocated);
  }

  void free(void* ptr) override {
    if (!ptr) return;
    refuse_while_streams_held("free");
    DeviceRef r = allocations_.find(ptr).value_or(nullptr);
    if (!r || r->base != ptr || r->origin != Origin::allocated)
      refuse_free("free", ptr, query(ptr), MemoryKind::device);
    bind();
    // As cudaFree: the device's queued work may still use it.
    check(cuCtxSynchronize(), "cuCtxSynchronize (before freeing device memory)");
    if (auto gone = allocations_.erase(ptr)) release(*gone);
  }

  void* host_alloc(size_t bytes) override {
    refuse_while_streams_held("host_alloc");
    bind();
    void* p = host_.alloc(bytes, MemoryKind::host);
    if (p) register_host(p, MemoryKind::host, Origin::allocated);
    return p;
  }

  void host_free(void* ptr) override {
    if (!ptr) return;
    RegionRef r = host_.find(ptr);
    if (!r || r->base != ptr || r->origin != Origin::allocated)
      refuse_free("host_free", ptr, query(ptr), MemoryKind::host);
    bind();
    check(cuMemHostUnregister(ptr), "cuMemHostUnregister");
    host_.remove(ptr, MemoryKind::host, Origin::allocated);
  }

  PointerInfo query(const void* ptr) override {
    if (DeviceRef r = allocations_.find(ptr).value_or(nullptr))
      return {MemoryKind::device, r->origin, r->base, r->length, r->id};
    if (RegionRef r = host_.find(ptr)) return r->info();
    // The driver is asked about memory we did not allocate: on a GPU that may need the
    // context lock (docs/device.md, "Blocking rules"), so never on a call's worker.
    refuse_while_streams_held("query of memory the backend did not allocate (cuPointerGetAttributes)");
    bind();
    unsigned memory_type = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned long long buffer_id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void* values[] = {&memory_type, &start, &size, &buffer_id};
    check(cuPointerGetAttributes(4, attrs, values, reinterpret_cast<CUdeviceptr>(ptr)), "cuPointerGetAttributes");
    if (memory_type != CU_MEMORYTYPE_DEVICE) return {};
    return {MemoryKind::device, Origin::foreign, reinterpret_cast<void*>(start), size, buffer_id | kForeignIdBit};
  }

  IpcHandle export_handle(void* base) override {
    bind();
    if (DeviceRef r = allocations_.find(base).value_or(nullptr)) {
      if (r->base != base || r->origin != Origin::allocated)
        throw InvalidArgument("export: " + address_text(base) + " is not the start of a device allocation made here");
      if (!fd_handles_)
        throw SystemError("cuda backend: export: this GPU or driver has no POSIX file descriptor handles");
      int fd = -1;
      check(cuMemExportToShareableHandle(&fd, r->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            "cuMemExportToShareableHandle");
      return IpcHandle::from_fd(fd, MemoryKind::device, r->length);
    }
    if (host_.find(base)) return host_.export_handle(base);
    const PointerInfo info = query(base);
    if (info.origin != Origin::foreign || info.base != base)
      throw InvalidArgument("export: " + address_text(base) + " is not the start of an allocation of this process");
    refuse_while_streams_held("export of device memory the backend did not allocate (cudaIpcGetMemHandle)");
    cudaIpcMemHandle_t h;
    static_assert(sizeof h == IpcHandle::kLegacyBytes);
    check(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle");
    return IpcHandle::from_legacy(&h, MemoryKind::device, info.length);
  }

  void* import_handle(const IpcHandle& h) override {
    bind();
    if (h.type() == IpcHandle::Type::legacy) {
      refuse_while_streams_held("import of a legacy IPC handle (cudaIpcOpenMemHandle)");
      cudaIpcMemHandle_t mh;
      std::memcpy(&mh, h.legacy().data(), sizeof mh);
      void* p = nullptr;
      check(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
      auto r = std::make_shared<DeviceRegion>(DeviceRegion{p, h.length(), next_allocation_id(), Origin::imported, 0});
      allocations_.insert(p, r->length, r);
      return p;
    }
    if (h.kind() == MemoryKind::host) {
      void* p = host_.import_handle(h);
      register_host(p, MemoryKind::host, Origin::imported);
      return p;
    }
    if (h.type() != IpcHandle::Type::fd || h.length() == 0 || h.length() % granularity_ != 0)
      throw InvalidArgument("import: the handle is not a device allocation's (" + std::to_string(h.length()) +
                            " bytes)");
    CUmemGenericAllocationHandle mh = 0;
    check(cuMemImportFromShareableHandle(&mh, reinterpret_cast<void*>(static_cast<uintptr_t>(h.fd())),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
    return map(mh, h.length(), Origin::imported);
  }

  void unimport(void* ptr) override {
    bind();
    if (DeviceRef r = allocations_.find(ptr).value_or(nullptr); r && r->base == ptr && r->origin == Origin::imported) {
      if (auto gone = allocations_.erase(ptr)) release(*gone);
      return;
    }
    if (RegionRef r = host_.find(ptr); r && r->base == ptr && r->origin == Origin::imported) {
      check(cuMemHostUnregister(ptr), "cuMemHostUnregister");
      host_.remove(ptr, MemoryKind::host, Origin::imported);
      return;
    }
    throw InvalidArgument("unimport: " + address_text(ptr) + " is not the address of an imported allocation");
  }

  // InvalidArgument when [ptr, ptr + bytes) starts in an allocation of ours and runs past
  // its end (memory we do not know is not checked).
  void check_range(const void* ptr, size_t bytes, const char* what) {
    const PointerInfo info = query_known(ptr);
    if (!info.base) return;
    const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - static_cast<const char*>(info.base));
    if (bytes > info.length - offset)
      throw InvalidArgument(std::string(what) + ": " + std::to_string(bytes) + " bytes at " + address_text(ptr) +
                            " run past the end of its allocation (" + std::to_string(info.length - offset) +
                            " bytes left of " + std::to_string(info.length) + ")");
  }

  // Makes this backend's device the calling thread's current one (and its primary context
  // current for the driver API).
  void bind() const { check(cudaSetDevice(ordinal_), "cudaSetDevice"); }

 private:
  CUmemAllocationProp properties() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    prop.requestedHandleTypes = fd_handles_ ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    return prop;
  }

  PointerInfo query_known(const void* ptr) {
    if (DeviceRef r = allocations_.find(ptr).value_or(nullptr))
      return {MemoryKind::device, r->origin, r->base, r->length, r->id};
    if (RegionRef r = host_.find(ptr)) return r->info();
    return {};
  }

  // Reserves an address range, maps the allocation there and opens it to this device;
  // releases the handle when any step fails.
  void* map(CUmemGenericAllocationHandle h, size_t length, Origin origin) {
    CUdeviceptr p = 0;
    CUresult r = cuMemAddressReserve(&p, length, granularity_, 0, 0);
    if (r == CUDA_SUCCESS) {
      r = cuMemMap(p, length, 0, h, 0);
      if (r == CUDA_SUCCESS) {
        CUmemAccessDesc access{};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = ordinal_;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = cuMemSetAccess(p, length, &access, 1);
        if (r != CUDA_SUCCESS) cuMemUnmap(p, length);
      }
      if (r != CUDA_SUCCESS) cuMemAddressFree(p, length);
    }
    if (r != CUDA_SUCCESS) {
      cuMemRelease(h);
      check(r, "cuMemAddressReserve/cuMemMap/cuMemSetAccess");
    }
    void* base = reinterpret_cast<void*>(p);
    allocations_.insert(base, length,
                        std::make_shared<DeviceRegion>(DeviceRegion{base, length, next_allocation_id(), origin, h}));
    return base;
  }

  void release(const DeviceRef& r) {
    if (!r->handle) {
      refuse_while_streams_held("unimport of a legacy IPC mapping (cudaIpcCloseMemHandle)");
      check(cudaIpcCloseMemHandle(r->base), "cudaIpcCloseMemHandle");
      return;
    }
    const auto p = reinterpret_cast<CUdeviceptr>(r->base);
    check(cuMemUnmap(p, r->length), "cuMemUnmap");
    check(cuMemAddressFree(p, r->length), "cuMemAddressFree");
    check(cuMemRelease(r->handle), "cuMemRelease");
  }

  void register_host(void* p, MemoryKind kind, Origin origin) {
    RegionRef r = host_.find(p);
    const CUresult rc = cuMemHostRegister(p, r->length, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (rc != CUDA_SUCCESS) {
      host_.remove(p, kind, origin);
      check(rc, "cuMemHostRegister");
    }
  }

  int ordinal_;
  CUdevice cu_device_ = 0;
  bool fd_handles_ = false;
  size_t granularity_ = 0;
  RangeMap<DeviceRef> allocations_;  // device memory allocated or imported here
  MemfdRegions host_;
};

class CudaExecution final : public Execution {
 public:
  CudaExecution(CudaMemory& memory, int ordinal) : memory_(memory) {
    check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, ordinal), "cudaDeviceGetAttribute");
    load_kernels();
  }

  Stream stream_create(StreamFlags flags = StreamFlags::non_blocking) override {
    refuse_while_streams_held("stream_create");
    memory_.bind();
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, flags == StreamFlags::blocking ? cudaStreamDefault : cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags");
    return s;
  }
  bool stream_capturing(Stream s) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t r = cudaStreamIsCapturing(native(s), &status);
    // The legacy stream while another stream captures in global mode: CUDA refuses the
    // question itself, and any work on it would invalidate that capture.
    if (r == cudaErrorStreamCaptureImplicit) return true;
    check(r, "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
  }
  void stream_destroy(Stream s) override {
    check(cudaStreamSynchronize(native(s)), "cudaStreamSynchronize");
    check(cudaStreamDestroy(native(s)), "cudaStreamDestroy");
  }
  void stream_synchronize(Stream s) override { check(cudaStreamSynchronize(native(s)), "cudaStreamSynchronize"); }

  Event event_create() override {
    refuse_while_streams_held("event_create");
    memory_.bind();
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void event_destroy(Event e) override { check(cudaEventDestroy(event(e)), "cudaEventDestroy"); }
  void event_record(Event e, Stream s) override { check(cudaEventRecord(event(e), native(s)), "cudaEventRecord"); }
  bool event_query(Event e) override {
    const cudaError_t r = cudaEventQuery(event(e));
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    return true;
  }
  void event_synchronize(Event e) override { check(cudaEventSynchronize(event(e)), "cudaEventSynchronize"); }
  void stream_wait(Stream s, Event e) override {
    check(cudaStreamWaitEvent(native(s), event(e), 0), "cudaStreamWaitEvent");
  }

  void copy(void* dst, const void* src, size_t bytes, Stream s) override {
    memory_.check_range(dst, bytes, "copy (destination)");
    memory_.check_range(src, bytes, "copy (source)");
    if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, native(s)), "cudaMemcpyAsync");
  }
  void memset(void* dst, int value, size_t bytes, Stream s) override {
    memory_.check_range(dst, bytes, "memset");
    if (bytes) check(cudaMemsetAsync(dst, value, bytes, native(s)), "cudaMemsetAsync");
  }

  void reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
              Stream s) override {
    if (!is_valid(type))
      throw InvalidArgument("reduce: data type " + std::to_string(static_cast<int>(type)) + " is not valid");
    if (!is_valid(op))
      throw InvalidArgument("reduce: reduce op " + std::to_string(static_cast<int>(op)) + " is not valid");
    if (nsrc < 1 || nsrc > kMaxReduceSources || !srcs)
      throw InvalidArgument("reduce: " + std::to_string(nsrc) + " sources (1 to " + std::to_string(kMaxReduceSources) +
                            ")");
    if (count > SIZE_MAX / size_of(type))
      throw InvalidArgument("reduce: " + std::to_string(count) + " elements overflow");
    const size_t bytes = count * size_of(type);
    memory_.check_range(dst, bytes, "reduce (destination)");
    for (int k = 0; k < nsrc; ++k) memory_.check_range(srcs[k], bytes, "reduce (source)");
    memory_.bind();
    launch_reduce(dst, srcs, nsrc, count, type, op, native(s), sm_count_);
  }

  void finalize(void* dst, size_t count, DataType type, ReduceOp op, int nranks, Stream s) override {
    if (!is_valid(type) || !is_valid(op)) throw InvalidArgument("finalize: invalid data type or reduce op");
    if (nranks < 1) throw InvalidArgument("finalize: nranks is " + std::to_string(nranks));
    if (count > SIZE_MAX / size_of(type))
      throw InvalidArgument("finalize: " + std::to_string(count) + " elements overflow");
    memory_.check_range(dst, count * size_of(type), "finalize");
    if (op != ReduceOp::avg || nranks == 1) return;
    memory_.bind();
    launch_divide(dst, count, type, nranks, native(s), sm_count_);
  }

  void host_callback(Stream s, void (*fn)(void*), void* arg) override {
    if (!fn) throw InvalidArgument("host_callback: fn is null");
    check(cudaLaunchHostFunc(native(s), fn, arg), "cudaLaunchHostFunc");
  }

  void host_task(Stream, const void* const*, int, HostTask) override {
    throw InvalidUsage("host_task: the cuda backend's device memory is the GPU's, which host code cannot reach; "
                       "run GPU kernels on the stream instead");
  }

  void write_value(Stream s, uint64_t* flag, uint64_t v) override {
    check_flag(flag, "write_value");
    // Without CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER: the stream's earlier writes are
    // visible before the flag.
    check(cuStreamWriteValue64(native(s), reinterpret_cast<CUdeviceptr>(flag), v, CU_STREAM_WRITE_VALUE_DEFAULT),
          "cuStreamWriteValue64");
  }
  void wait_value(Stream s, const uint64_t* flag, uint64_t v) override {
    check_flag(flag, "wait_value");
    check(cuStreamWaitValue64(native(s), reinterpret_cast<CUdeviceptr>(flag), v, CU_STREAM_WAIT_VALUE_GEQ),
          "cuStreamWaitValue64");
  }

 private:
  static cudaStream_t native(Stream s) { return static_cast<cudaStream_t>(s); }
  static cudaEvent_t event(Event e) { return static_cast<cudaEvent_t>(e); }
  void check_flag(const void* flag, const char* call) {
    if (!flag || reinterpret_cast<uintptr_t>(flag) % alignof(uint64_t) != 0)
      throw InvalidArgument(std::string(call) + ": the flag " + address_text(flag) + " is not an aligned 8-byte word");
    memory_.check_range(flag, sizeof(uint64_t), call);
  }

  CudaMemory& memory_;
  int sm_count_ = 1;
};

// A program's own CUDA runtime calls (ground/device/program_calls.hpp): what PyTorch makes.
class CudaProgram final : public ProgramCalls {
 public:
  explicit CudaProgram(CudaMemory& memory) : memory_(memory) {}
  void* device_malloc(size_t bytes) override {
    memory_.bind();
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void device_free(void* p) override { check(cudaFree(p), "cudaFree"); }
  void* host_malloc(size_t bytes) override {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    return p;
  }
  void host_free(void* p) override { check(cudaFreeHost(p), "cudaFreeHost"); }
  void kernel_copy(void* dst, const void* src, size_t bytes, Stream s) override {
    launch_program_copy(dst, src, bytes, static_cast<cudaStream_t>(s));
  }
  void begin_capture(Stream s) override {
    check(cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
  }
  void end_capture(Stream s) override {
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(static_cast<cudaStream_t>(s), &graph), "cudaStreamEndCapture");
    if (graph) check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }

 private:
  CudaMemory& memory_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() : CudaBackend(current_device()) {}
  const char* name() const override { return "cuda"; }
  std::string device_name() const override { return device_name_; }
  Memory& memory() override { return memory_; }
  Execution& execution() override { return execution_; }
  ProgramCalls& program() override { return program_; }

 private:
  explicit CudaBackend(int ordinal) : memory_(ordinal), execution_(memory_, ordinal), program_(memory_) {
    char name[256] = {};
    CUdevice d = 0;
    check(cuDeviceGet(&d, ordinal), "cuDeviceGet");
    check(cuDeviceGetName(name, sizeof name, d), "cuDeviceGetName");
    device_name_ = name;
  }

  // Initialises the driver and picks the calling thread's current device.
  static int current_device() {
    check(cuInit(0), "cuInit");
    int n = 0;
    check(cuDeviceGetCount(&n), "cuDeviceGetCount");
    if (n == 0) throw SystemError("cuda backend: no GPU (the driver is loaded but cuDeviceGetCount gives 0)");
    int ordinal = 0;
    check(cudaGetDevice(&ordinal), "cudaGetDevice");
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    return ordinal;
  }

  std::string device_name_;
  CudaMemory memory_;
  CudaExecution execution_;
  CudaProgram program_;
};

}  // namespace

}  // namespace strata::device::cuda

extern "C" __attribute__((visibility("default"))) strata::device::Backend* strata_cuda_backend_create() {
  return new strata::device::cuda::CudaBackend();
}
