// Device memory and streams: what a program needs to move data in and out of device
// memory the same way on every device backend (docs/device.md).
//
//   void* d = strata::alloc(n * sizeof(float));          // device memory (as ncclMemAlloc)
//   strata::device::Stream s = strata::device::stream_create();
//   strata::device::memcpy_async(d, host, n * sizeof(float), s);
//   strata::device::stream_synchronize(s);
//   strata::free(d);
//
// The backend is chosen once per process by STRATA_DEVICE (auto, cuda, emulated, none;
// docs/environment.md). On CUDA the pointers and streams are CUDA's own (a Stream is a
// cudaStream_t), so a CUDA program may use CUDA's calls on them instead. The emulated
// backend runs everything on the CPU: device memory there cannot be read by host code
// (a host read crashes, as on a GPU), and a stream is a thread.
//
// Errors: InvalidUsage when no backend is available (STRATA_DEVICE=none, or auto without
// a GPU); InvalidArgument for a pointer or stream that is not one of this backend's;
// SystemError when the backend fails (the message names the backend call and its error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

// Where a buffer lives.
enum class MemoryKind : uint8_t { host, device };

// Allocates `bytes` of memory of `kind`, as ncclMemAlloc does: device memory from the
// device backend (exportable to other processes of the node), or page-aligned host
// memory (pinned and device-accessible where a backend is loaded). 0 bytes gives nullptr.
void* alloc(size_t bytes, MemoryKind kind = MemoryKind::device);
// Frees what alloc() returned (nullptr: nothing). InvalidArgument for any other pointer.
void free(void* ptr);

namespace device {

// The backend's native stream: a cudaStream_t on CUDA, an emulated stream otherwise;
// nullptr is the backend's default stream. Streams made by stream_create() do not
// synchronise with the default stream (CUDA: cudaStreamNonBlocking).
using Stream = void*;

// "cuda", "emulated" or "none".
const char* backend_name();
bool available();
// The device's name, e.g. "NVIDIA H100 80GB HBM3" or "emulated"; "none" without a backend.
std::string device_name();

// Device memory (of this backend, allocated here or imported) or host memory (anything
// else). Works without a backend too (then everything is host memory).
MemoryKind kind_of(const void* ptr);

void* alloc(size_t bytes);  // device memory; 0 bytes gives nullptr
void free(void* ptr);       // device memory from alloc(); nullptr: nothing

Stream stream_create();
void stream_destroy(Stream stream);  // waits for the work queued on it
void stream_synchronize(Stream stream);

// Stream-ordered: each runs after the work queued on `stream` before it. The direction
// of a copy is inferred from the pointers (host or device memory, in any combination).
void memcpy_async(void* dst, const void* src, size_t bytes, Stream stream);
void memset_async(void* dst, int value, size_t bytes, Stream stream);
// Runs fn(arg) on a backend thread when the stream reaches this point; fn must not call
// device functions (as cudaLaunchHostFunc).
void launch_host_func(Stream stream, void (*fn)(void*), void* arg);

}  // namespace device
}  // namespace strata
