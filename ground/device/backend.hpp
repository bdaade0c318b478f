// The device backend: Memory and Execution of one device, chosen once per process by
// STRATA_DEVICE (auto | cuda | emulated | none; auto is cuda where an NVIDIA driver and
// GPU exist, else none). docs/device.md describes both backends.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ground/device/execution.hpp"
#include "ground/device/memory.hpp"
#include "ground/device/program_calls.hpp"

namespace strata::device {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;          // "cuda", "emulated"
  virtual std::string device_name() const = 0;  // "NVIDIA H100 80GB HBM3", "emulated"
  virtual Memory& memory() = 0;
  virtual Execution& execution() = 0;
  // A program's own CUDA calls (program_calls.hpp), for tests and the replay client.
  virtual ProgramCalls& program() = 0;
};

// This process's backend (made on first use and kept until exit), or nullptr for none.
// A bad STRATA_DEVICE, or STRATA_DEVICE=cuda where CUDA cannot be used, throws (every
// call, naming why).
Backend* backend();
// The backend if one was made already, else nullptr, without making one: what a call that
// came without a stream asks (one atomic load), so host calls in a process that never
// touched the device pay nothing and never load CUDA.
Backend* loaded_backend();
// Whether this process has, or may make, a backend, without making one (so a
// communicator's setup creates no CUDA context): STRATA_DEVICE is emulated or cuda, or
// auto where an NVIDIA driver exists. A backend that then fails to load fails the first
// device call, saying why. InvalidArgument for a bad STRATA_DEVICE.
bool backend_possible();
// backend(), or InvalidUsage naming `what` when there is none.
Backend& require_backend(const char* what);

// While one lives, this thread runs a call whose users' streams wait for it (the worker of
// a device call, src/core/stream_order): a backend refuses it streams, events, pinned
// host memory and freeing device memory (InternalError naming `call`). On a GPU those
// driver calls can wait for a lock that the user's thread keeps while it blocks on that
// waiting stream (a copy to pageable memory), or, as a free does, for the whole device:
// a hang, seen on an H200 (tests/device/test_held_stream.cpp probes which calls wait).
// Refused on every backend, so CI's emulated
// runs catch what would hang a GPU; what a call needs is made before (Engine::prepare).
class StreamsHeld {
 public:
  StreamsHeld();
  ~StreamsHeld();
  StreamsHeld(const StreamsHeld&) = delete;
  StreamsHeld& operator=(const StreamsHeld&) = delete;
};
// Throws that InternalError on a thread inside a StreamsHeld.
void refuse_while_streams_held(const char* call);

// A new backend for `choice` (what STRATA_DEVICE says; nullptr for "none", or "auto"
// without a GPU). backend() makes its one with this; tests make their own.
std::unique_ptr<Backend> make_backend(std::string_view choice);

// The CUDA backend lives in its own library, next to libstrata, loaded only when asked
// for (so libstrata never links CUDA): it exports this factory, which makes the backend
// for the calling thread's current device or throws SystemError naming why it cannot.
inline constexpr const char* kCudaLibrary = "libstrata-cuda.so";
inline constexpr const char* kCudaFactory = "strata_cuda_backend_create";
using CudaFactory = Backend* (*)();

}  // namespace strata::device
