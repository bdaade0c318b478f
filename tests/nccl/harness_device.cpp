// harness.h's buffers on Strata's device layer (STRATA_DEVICE=emulated here, or cuda):
// device memory from ncclMemAlloc, filled and read through copies queued on one stream of
// Strata's, which the calls are given as their cudaStream_t. A result is read by a copy
// queued after the call on that stream, then a wait for that copy alone: so the calls
// must be ordered on the stream they were given (nothing else waits for them).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "harness.h"
#include "strata/device.hpp"

namespace {

template <typename F>
auto must(const char* what, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FATAL rank %d: %s: %s\n", g_rank, what, e.what());
    std::exit(2);
  }
}

strata::device::Stream stream() {
  static strata::device::Stream s = must("stream_create", [] { return strata::device::stream_create(); });
  return s;
}

}  // namespace

extern "C" {

void* harness_alloc(size_t bytes) {
  void* p = nullptr;
  harness_must(ncclMemAlloc(&p, bytes ? bytes : 1), "ncclMemAlloc", __FILE__, __LINE__);
  if (strata::device::kind_of(p) != strata::MemoryKind::device) {
    std::fprintf(stderr, "FATAL rank %d: ncclMemAlloc gave host memory (is STRATA_DEVICE set?)\n", g_rank);
    std::exit(2);
  }
  must("memset_async", [&] { strata::device::memset_async(p, 0, bytes, stream()); });
  return p;
}

void harness_free(void* p) {
  must("stream_synchronize", [] { strata::device::stream_synchronize(stream()); });
  harness_must(ncclMemFree(p), "ncclMemFree", __FILE__, __LINE__);
}

void harness_upload(void* dst, const void* host, size_t bytes) {
  must("memcpy_async to the device", [&] { strata::device::memcpy_async(dst, host, bytes, stream()); });
}

void harness_download(void* host, const void* src, size_t bytes) {
  must("memcpy_async from the device", [&] {
    strata::device::memcpy_async(host, src, bytes, stream());
    strata::device::stream_synchronize(stream());
  });
}

cudaStream_t harness_stream(void) { return static_cast<cudaStream_t>(stream()); }

void harness_sync(void) {
  must("stream_synchronize", [] { strata::device::stream_synchronize(stream()); });
}

const char* harness_memory(void) { return "device (Strata's device layer)"; }

}  // extern "C"
