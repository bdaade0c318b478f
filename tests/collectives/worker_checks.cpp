#include "worker_checks.hpp"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sstream>

#include "ground/device/backend.hpp"

namespace strata_test {

namespace {
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kSentinel = 0xC3;
}  // namespace

double mono_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void Reporter::fail(const std::string& desc, const std::string& why) {
  ++failed;
  if (printed++ < max_print) {
    fprintf(stderr, "FAIL rank %d/%d: %s: %s\n", rank, n, desc.c_str(), why.c_str());
    fflush(stderr);
  } else if (printed == max_print + 1) {
    fprintf(stderr, "rank %d: (further failures not printed)\n", rank);
  }
}

void Reporter::result(const std::string& desc, const std::string& why) {
  if (why.empty()) {
    ++passed;
    if (verbose) printf("ok %s\n", desc.c_str());
  } else {
    fail(desc, why);
  }
}

DeviceMode& device_mode() {
  static DeviceMode m;
  return m;
}

AllocMode& alloc_mode() {
  static AllocMode m;
  return m;
}

void Buf::release() {
  if (segment_) strata::device::backend()->program().device_free(segment_);
  else if (dev_) strata::free(dev_);
  segment_ = nullptr;
  if (raw_ && (device_mode().on || kind_ == AllocMode::strata)) {
    strata::free(raw_);
  } else if (raw_ && kind_ == AllocMode::registered) {
    alloc_mode().comm->deregister_buffer(handle_);
    munmap(raw_, mapped_);
    close(fd_);
  } else {
    std::free(raw_);
  }
  raw_ = dev_ = handle_ = nullptr;
  fd_ = -1;
}

namespace {
// A memfd mapped MAP_SHARED and registered: user memory a peer can map.
void* registered_memory(size_t bytes, int& fd, size_t& mapped, void*& handle) {
  mapped = (bytes + 4095) / 4096 * 4096;
  fd = memfd_create("strata-test-buffer", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(mapped)) != 0) return nullptr;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  handle = alloc_mode().comm->register_buffer(p, mapped);
  return p;
}
}  // namespace

void Buf::alloc(size_t bytes) {
  release();
  bytes_ = bytes;
  const size_t total = bytes + 2 * kGuard;
  if (device_mode().on) {
    // Pinned host memory: on CUDA a copy to or from pageable memory waits for its stream,
    // which would hide a missing order between the call and the copies around it.
    raw_ = strata::alloc(total, strata::MemoryKind::host);
    if (device_mode().foreign) {
      segment_ = strata::device::backend()->program().device_malloc(total + kForeignOffset);
      dev_ = static_cast<char*>(segment_) + kForeignOffset;
    } else {
      dev_ = strata::alloc(total, strata::MemoryKind::device);
    }
  } else if ((kind_ = alloc_mode().kind) == AllocMode::strata) {
    raw_ = strata::alloc(total, strata::MemoryKind::host);
  } else if (kind_ == AllocMode::registered) {
    raw_ = registered_memory(total, fd_, mapped_, handle_);
  } else if (posix_memalign(&raw_, 64, total) != 0) {
    raw_ = nullptr;
  }
  if (!raw_) {
    fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
    exit(3);
  }
  std::memset(raw_, kGuardByte, kGuard);
  std::memset(data() + bytes, kGuardByte, kGuard);
}

void* Buf::on_device(const void* p) const {
  if (!p || !dev_) return const_cast<void*>(p);
  return static_cast<uint8_t*>(dev_) + (static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(raw_));
}

void Buf::to_device(strata::device::Stream s) const {
  if (dev_) strata::device::memcpy_async(dev_, raw_, bytes_ + 2 * kGuard, s);
}

void Buf::to_host(strata::device::Stream s) {
  if (dev_) strata::device::memcpy_async(raw_, dev_, bytes_ + 2 * kGuard, s);
}

void Buf::fill_sentinel() { std::memset(data(), kSentinel, bytes_); }

bool Buf::guards_ok() const {
  if (!raw_) return true;
  const uint8_t* p = static_cast<const uint8_t*>(raw_);
  for (size_t i = 0; i < kGuard; ++i)
    if (p[i] != kGuardByte || p[kGuard + bytes_ + i] != kGuardByte) return false;
  return true;
}

size_t Buf::first_non_sentinel(size_t from, size_t to) const {
  for (size_t i = from; i < to; ++i)
    if (data()[i] != kSentinel) return i;
  return SIZE_MAX;
}

std::string Bad::str(const std::string& what) const {
  std::ostringstream o;
  o << what << ": first bad index " << first << " (" << count << " bad): got " << got << " expected " << exp;
  return o.str();
}

void fill_raw(Buf& b, uint64_t base) {
  uint8_t* p = b.data();
  size_t i = 0, n = b.bytes();
  for (; i + 8 <= n; i += 8) {
    uint64_t h = mix64(base + i / 8);
    std::memcpy(p + i, &h, 8);
  }
  if (i < n) {
    uint64_t h = mix64(base + i / 8);
    std::memcpy(p + i, &h, n - i);
  }
}

std::string check_raw(const Buf& got, uint64_t base, size_t elem_size, const char* what) {
  if (!got.guards_ok()) return std::string("guard bytes overwritten around ") + what;
  Buf ref(got.bytes());
  fill_raw(ref, base);
  for (size_t i = 0; i < got.bytes(); ++i)
    if (got.data()[i] != ref.data()[i]) {
      char b[200];
      snprintf(b, sizeof b, "%s: first bad element %zu (byte %zu of %zu): got 0x%02x expected 0x%02x", what,
               i / elem_size, i, got.bytes(), got.data()[i], ref.data()[i]);
      return b;
    }
  return {};
}

uint64_t msg_base(uint64_t seed, int src, int dst, int k) {
  return mix64(seed ^ mix64((uint64_t(src) << 40) ^ (uint64_t(dst) << 20) ^ uint64_t(k)));
}

}  // namespace strata_test
