#include "ground/device/emulated/backend.hpp"

#include "ground/device/emulated/execution.hpp"
#include "ground/device/emulated/memory.hpp"

namespace strata::device::emulated {

namespace {

class EmulatedBackend final : public Backend {
 public:
  explicit EmulatedBackend(unsigned delay_us) : execution_(memory_, delay_us) {
    memory_.on_free([this] { execution_.synchronize_all(); });
  }
  const char* name() const override { return "emulated"; }
  std::string device_name() const override { return "emulated"; }
  Memory& memory() override { return memory_; }
  Execution& execution() override { return execution_; }

 private:
  EmulatedMemory memory_;
  EmulatedExecution execution_;  // after memory_: its streams stop before the memory goes
};

}  // namespace

std::unique_ptr<Backend> make_backend(unsigned delay_us) { return std::make_unique<EmulatedBackend>(delay_us); }

}  // namespace strata::device::emulated
