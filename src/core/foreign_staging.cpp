#include "core/foreign_staging.hpp"

#include <algorithm>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
constexpr size_t kAlign = 256;  // each staged range starts aligned as a cudaMalloc'd one does
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

ForeignStaging::~ForeignStaging() {
  try {
    device::Execution& ex = backend_.execution();
    if (stream_) ex.stream_destroy(stream_);
    if (done_) ex.event_destroy(done_);
    device::Memory& m = backend_.memory();
    for (void* p : retired_) m.free(p);
    if (block_) m.free(block_);
  } catch (const Error& e) {
    STRATA_WARN("the staging of foreign device buffers could not be released: %s", e.what());
  }
}

void* ForeignStaging::block(size_t bytes) {
  if (bytes <= block_bytes_) return block_;
  bytes = std::max(bytes, 2 * block_bytes_);
  void* grown = backend_.memory().alloc(bytes);
  if (block_) retired_.push_back(block_);
  block_ = grown;
  block_bytes_ = bytes;
  return block_;
}

ForeignStaging::Plan ForeignStaging::prepare(const std::vector<Buffer>& buffers) {
  Plan plan;
  plan.moved.reserve(buffers.size());
  // The foreign ranges, merged where they overlap (an in-place call's send and receive).
  struct Range {
    const char* begin;
    const char* end;
    size_t at = 0;  // offset in the block
  };
  std::vector<Range> ranges;
  std::vector<bool> foreign(buffers.size(), false);
  device::Memory& mem = backend_.memory();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    if (!b.ptr || b.bytes == 0) continue;
    if (mem.query(b.ptr).origin != device::Origin::foreign) continue;
    foreign[i] = true;
    ranges.push_back({static_cast<const char*>(b.ptr), static_cast<const char*>(b.ptr) + b.bytes});
  }
  if (ranges.empty()) {
    for (const Buffer& b : buffers) plan.moved.push_back(const_cast<void*>(b.ptr));
    return plan;
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.begin < merged.back().end) merged.back().end = std::max(merged.back().end, r.end);
    else merged.push_back(r);
  }
  size_t total = 0;
  for (Range& r : merged) {
    r.at = total;
    total += aligned(static_cast<size_t>(r.end - r.begin));
  }
  char* base = static_cast<char*>(block(total));
  if (!stream_) stream_ = backend_.execution().stream_create();
  if (!done_) done_ = backend_.execution().event_create();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    if (!foreign[i]) {
      plan.moved.push_back(const_cast<void*>(b.ptr));
      continue;
    }
    const char* p = static_cast<const char*>(b.ptr);
    const Range& r = *std::find_if(merged.begin(), merged.end(), [&](const Range& m) { return p >= m.begin && p < m.end; });
    char* staged = base + r.at + static_cast<size_t>(p - r.begin);
    plan.moved.push_back(staged);
    if (b.read) plan.in.push_back({staged, b.ptr, b.bytes});
    if (b.written) plan.out.push_back({const_cast<void*>(b.ptr), staged, b.bytes});
  }
  return plan;
}

void ForeignStaging::run(const std::vector<Plan::Copy>& copies) {
  if (copies.empty()) return;
  device::Execution& ex = backend_.execution();
  for (const Plan::Copy& c : copies) ex.copy(c.dst, c.src, c.bytes, stream_);
  ex.event_record(done_, stream_);
  ex.event_synchronize(done_);
}

}  // namespace strata
