// The device backend's memory: allocations, what a pointer is, and sharing an allocation
// with another process of the node (UCC's memory component). Copies and memsets are
// stream tasks (ground/device/execution.hpp). Implemented by the emulated backend
// (ground/device/emulated/) and the CUDA backend (ground/device/cuda/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ground/device/ipc_handle.hpp"
#include "strata/device.hpp"

namespace strata::device {

// Where an allocation came from, as far as this backend knows.
enum class Origin : uint8_t {
  unknown,    // host memory this backend did not allocate (base, length and id are 0)
  allocated,  // by this Memory (device memory, or pinned host memory)
  imported,   // a peer's allocation mapped here by import()
  foreign,    // device memory someone else allocated (PyTorch's cudaMalloc); CUDA only
  registered, // host memory the user mapped and registered with a communicator (shared_host.hpp)
};

struct PointerInfo {
  MemoryKind kind = MemoryKind::host;
  Origin origin = Origin::unknown;
  void* base = nullptr;  // the allocation holding the pointer
  size_t length = 0;     // its length in bytes (what export() shares)
  uint64_t id = 0;       // unique in this process and never reused; 0: unknown host memory
};

class Memory {
 public:
  virtual ~Memory() = default;

  // Device memory. alloc(0) is nullptr; free(nullptr) does nothing. free() of anything
  // but a pointer alloc() returned is InvalidArgument. The bytes are not readable by
  // host code (on the emulated backend a host read crashes, as on a GPU).
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;

  // Pinned host memory: page-aligned, readable and writable by host code and by the
  // backend's tasks (staging buffers, the flags of write_value/wait_value), exportable.
  virtual void* host_alloc(size_t bytes) = 0;
  virtual void host_free(void* ptr) = 0;

  // What `ptr` is: any pointer may be asked (host memory the backend does not know is
  // {host, unknown}).
  virtual PointerInfo query(const void* ptr) = 0;

  // A handle another process of the node can import: `base` must be the start of an
  // allocation of this process (allocated here, or foreign device memory; not imported).
  // The caller owns the handle (and its fd); send it with send_handle().
  virtual IpcHandle export_handle(void* base) = 0;
  // Maps a peer's exported allocation here and returns its address in this process (of
  // the handle's kind: device memory for device allocations). The handle stays the
  // caller's. A peer freeing its allocation while it is mapped here crashes no one: the
  // memory lives until the last mapping goes.
  virtual void* import_handle(const IpcHandle& handle) = 0;
  virtual void unimport(void* ptr) = 0;
};

// The InvalidArgument for freeing `ptr` as `wanted` memory when query() says `info`:
// names what the pointer is instead (host memory, inside an allocation, imported, ...).
[[noreturn]] void refuse_free(const char* call, const void* ptr, const PointerInfo& info, MemoryKind wanted);
// "0x7f...": how messages show an address.
std::string address_text(const void* ptr);

}  // namespace strata::device
