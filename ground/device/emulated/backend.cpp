#include "ground/device/emulated/backend.hpp"

#include <atomic>
#include <chrono>

#include "ground/device/emulated/context_lock.hpp"
#include "ground/device/emulated/execution.hpp"
#include "ground/device/emulated/memory.hpp"
#include "ground/settings.hpp"

namespace strata::device::emulated {

namespace {

// A program's own CUDA calls, with the blocking CUDA gives them: cudaMalloc, cudaFree,
// cudaHostAlloc and cudaFreeHost synchronize the device (the CUDA guide's implicit
// synchronization) holding the context lock, as does the first launch of a kernel whose
// module loads lazily.
class EmulatedProgram final : public ProgramCalls {
 public:
  EmulatedProgram(EmulatedMemory& memory, EmulatedExecution& execution) : memory_(memory), execution_(execution) {}
  void* device_malloc(size_t bytes) override { return memory_.foreign_alloc(bytes); }
  void device_free(void* p) override { memory_.foreign_free(p); }
  void* host_malloc(size_t bytes) override {
    memory_.synchronize_device("a program's cudaHostAlloc");
    return memory_.host_alloc(bytes);
  }
  void host_free(void* p) override {
    if (!p) return;
    memory_.synchronize_device("a program's cudaFreeHost");
    memory_.host_free(p);
  }
  void kernel_copy(void* dst, const void* src, size_t bytes, device::Stream s) override {
    if (!module_loaded_.exchange(true))
      memory_.synchronize_device("the first launch of a program's kernel (lazy module loading)");
    execution_.copy(dst, src, bytes, s);
  }
  void begin_capture(device::Stream s) override { execution_.set_capturing(s, true); }
  void end_capture(device::Stream s) override { execution_.set_capturing(s, false); }

 private:
  EmulatedMemory& memory_;
  EmulatedExecution& execution_;
  std::atomic<bool> module_loaded_{false};
};

class EmulatedBackend final : public Backend {
 public:
  explicit EmulatedBackend(const Options& o)
      : lock_(o.cuda_rules, std::chrono::milliseconds(static_cast<long long>(o.lock_wait_s * 1000))),
        memory_(lock_),
        execution_(memory_, lock_, o.delay_us),
        program_(memory_, execution_) {
    memory_.on_free([this] { execution_.synchronize_all(); });
  }
  const char* name() const override { return "emulated"; }
  std::string device_name() const override { return "emulated"; }
  Memory& memory() override { return memory_; }
  Execution& execution() override { return execution_; }
  ProgramCalls& program() override { return program_; }
  ContextLock& lock() { return lock_; }

 private:
  ContextLock lock_;
  EmulatedMemory memory_;
  EmulatedExecution execution_;  // after memory_: its streams stop before the memory goes
  EmulatedProgram program_;
};

}  // namespace

Options options_from_settings() {
  Options o;
  o.delay_us = static_cast<unsigned>(settings::integer("STRATA_EMULATED_DELAY_US"));
  o.cuda_rules = settings::integer("STRATA_EMULATED_CUDA_RULES") != 0;
  o.lock_wait_s = settings::number("STRATA_EMULATED_LOCK_WAIT");
  return o;
}

std::unique_ptr<Backend> make_backend(const Options& options) { return std::make_unique<EmulatedBackend>(options); }

bool context_lock_held(Backend& b) {
  auto* e = dynamic_cast<EmulatedBackend*>(&b);
  return e && e->lock().held();
}

}  // namespace strata::device::emulated
