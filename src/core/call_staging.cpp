#include "core/call_staging.hpp"

#include <algorithm>
#include <cstring>

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {
constexpr size_t kAlign = 256;             // each staged range starts aligned as a cudaMalloc'd one does
constexpr size_t kFactorBytes = 1 << 20;   // copies of a factor: one reduce task per this many bytes
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

CallStaging::~CallStaging() {
  try {
    device::Execution& ex = backend_.execution();
    if (stream_) ex.stream_destroy(stream_);
    if (done_) ex.event_destroy(done_);
    device::Memory& m = backend_.memory();
    for (void* p : retired_) m.free(p);
    if (block_) m.free(block_);
    if (factors_) m.free(factors_);
    if (factor_) m.host_free(factor_);
  } catch (const Error& e) {
    STRATA_WARN("the staging memory of device calls could not be released: %s", e.what());
  }
}

char* CallStaging::grow(char*& block, size_t& have, size_t bytes) {
  if (bytes <= have) return block;
  bytes = std::max(bytes, 2 * have);
  char* grown = static_cast<char*>(backend_.memory().alloc(bytes));
  if (block) retired_.push_back(block);
  block = grown;
  have = bytes;
  return block;
}

CallStaging::Plan CallStaging::prepare(const std::vector<Buffer>& buffers) {
  Plan plan;
  struct Range {
    const char* begin;
    const char* end;
    size_t at = 0;  // offset in the block
  };
  auto range_of = [](const Buffer& b) {
    return Range{static_cast<const char*>(b.ptr), static_cast<const char*>(b.ptr) + b.bytes};
  };
  auto used = [](const Buffer& b) { return b.ptr && b.bytes > 0; };
  // Staged: foreign memory, a scaled input, and then whatever overlaps a staged buffer.
  std::vector<bool> staged(buffers.size(), false);
  device::Memory& mem = backend_.memory();
  bool scales = false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    if (!used(b)) continue;
    scales |= b.scale != nullptr;
    staged[i] = b.scale || mem.query(b.ptr).origin == device::Origin::foreign;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < buffers.size(); ++i)
      for (size_t j = 0; j < buffers.size(); ++j)
        if (staged[j] && !staged[i] && used(buffers[i]) && used(buffers[j]) &&
            range_of(buffers[i]).begin < range_of(buffers[j]).end && range_of(buffers[j]).begin < range_of(buffers[i]).end)
          staged[i] = grew = true;
  }
  std::vector<Range> ranges;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (staged[i]) ranges.push_back(range_of(buffers[i]));
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
  char* base = grow(block_, block_bytes_, total);
  device::Execution& ex = backend_.execution();
  if (!stream_) stream_ = ex.stream_create();
  if (!done_) done_ = ex.event_create();
  if (scales && !factors_) {
    factors_ = static_cast<char*>(mem.alloc(kFactorBytes));
    factor_ = static_cast<unsigned char*>(mem.host_alloc(sizeof(Call::PreMul::value)));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    if (!staged[i]) {
      plan.moved.push_back(const_cast<void*>(b.ptr));
      continue;
    }
    const char* p = static_cast<const char*>(b.ptr);
    const Range& r = *std::find_if(merged.begin(), merged.end(), [&](const Range& m) { return p >= m.begin && p < m.end; });
    char* moved = base + r.at + static_cast<size_t>(p - r.begin);
    plan.moved.push_back(moved);
    if (b.read) {
      Plan::Copy c{moved, b.ptr, b.bytes};
      if (b.scale) c.scaled = true, c.type = b.type, c.factor = *b.scale;
      plan.in.push_back(c);
    }
    if (b.written) plan.out.push_back({const_cast<void*>(b.ptr), moved, b.bytes});
  }
  // A scaled input is read after any plain copy in of a buffer it overlaps.
  std::stable_partition(plan.in.begin(), plan.in.end(), [](const Plan::Copy& c) { return !c.scaled; });
  return plan;
}

// dst = src * factor: the factor copied to the device, doubled until it fills a block of
// copies, then a prod reduce task per block.
void CallStaging::scale(const Plan::Copy& c) {
  device::Execution& ex = backend_.execution();
  const size_t esz = size_of(c.type), count = c.bytes / esz;
  const size_t n = std::min(count, kFactorBytes / esz);
  if (c.factor.device_factor) {
    ex.copy(factors_, c.factor.device_factor, esz, stream_);
  } else {
    std::memcpy(factor_, c.factor.value, esz);  // the previous call's copy from it is done
    ex.copy(factors_, factor_, esz, stream_);
  }
  for (size_t k = 1; k < n; k *= 2) ex.copy(factors_ + k * esz, factors_, std::min(k, n - k) * esz, stream_);
  for (size_t done = 0; done < count; done += n) {
    const size_t m = std::min(n, count - done);
    const void* srcs[2] = {static_cast<const char*>(c.src) + done * esz, factors_};
    ex.reduce(static_cast<char*>(c.dst) + done * esz, srcs, 2, m, c.type, ReduceOp::prod, stream_);
  }
}

void CallStaging::run(const std::vector<Plan::Copy>& copies) {
  if (copies.empty()) return;
  device::Execution& ex = backend_.execution();
  for (const Plan::Copy& c : copies) {
    if (c.scaled) scale(c);
    else ex.copy(c.dst, c.src, c.bytes, stream_);
  }
  ex.event_record(done_, stream_);
  ex.event_synchronize(done_);
}

}  // namespace strata
