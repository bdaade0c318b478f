#include "core/executor.hpp"

#include <cstring>
#include <string>

#include "ground/reduce.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

// Host memory: the local steps run on the calling thread, so their results are visible to
// the links as soon as they return.
class HostExecutor final : public Executor {
 public:
  void copy(char* dst, const char* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void reduce(char* dst, const char* src, size_t count, const Reduction& how) override { how.fn(dst, dst, src, count); }
  void finalize(char* buf, size_t count, DataType type, ReduceOp op, int nranks) override {
    strata::finalize(buf, count, type, op, nranks);
  }
  void settle() override {}
};

}  // namespace

std::unique_ptr<Executor> make_executor(MemoryKind kind) {
  if (kind == MemoryKind::host) return std::make_unique<HostExecutor>();
  throw InvalidUsage(std::string("a call on ") + name(kind) +
                     " memory needs the device layer (ground/device), which this build does not have yet");
}

}  // namespace strata
