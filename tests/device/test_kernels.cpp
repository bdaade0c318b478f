// The reduce and finalize tasks (on CUDA: the GPU's kernels) for every type and op
// against the serial reference (reference.hpp), through the Execution interface: odd
// counts, 1 to kMaxReduceSources sources, in and out of place, misaligned pointers (the
// kernels' scalar path beside their 16-byte one); every fp8 pair of codes; every 8- and
// 16-bit code through the accumulation type and back.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "device_test.hpp"
#include "reference.hpp"

namespace strata_test {
namespace {

using strata::kNumDataTypes;
using strata::kNumReduceOps;
using strata::device::kMaxReduceSources;

// An input element: wrapping integers get any bits; floats values whose sums and products
// stay meaningful, with a few arbitrary codes (NaN, infinity, the extremes) for 8/16 bits.
uint64_t random_element(DataType t, ReduceOp op, std::mt19937_64& rng) {
  const double range = op == ReduceOp::prod ? 2.5 : 100.0;
  std::uniform_real_distribution<double> value(-range, range);
  if (const NarrowFormat* f = narrow_format(t)) {
    if (rng() % 16 == 0) return rng() & ((1ull << f->bits) - 1);
    return narrow_encode(*f, value(rng) * (t == DataType::float8_e4m3 ? 0.5 : 1.0));
  }
  if (t == DataType::float32) return detail::bits32(static_cast<float>(value(rng)));
  if (t == DataType::float64) return detail::bits64(value(rng));
  return rng();
}

struct Shape {
  int nsrc;
  size_t count;
  size_t misalign;  // elements every pointer is moved by (0: all 16-byte aligned)
  bool in_place;    // dst == srcs[0]
};

// One reduce (and, for avg, finalize by nsrc) on the device, checked element by element.
void check_reduce(DataType t, ReduceOp op, const Shape& sh, std::mt19937_64& rng) {
  const size_t esize = strata::size_of(t);
  const size_t bytes = (sh.count + sh.misalign) * esize;
  std::vector<std::vector<char>> host(sh.nsrc, std::vector<char>(bytes));
  for (auto& h : host)
    for (size_t i = 0; i < sh.count; ++i) set_element_bits(h.data() + sh.misalign * esize, i, t, random_element(t, op, rng));
  std::vector<std::unique_ptr<DeviceBuffer>> in;
  std::vector<const void*> srcs;
  for (auto& h : host) {
    in.push_back(std::make_unique<DeviceBuffer>(bytes ? bytes : 1));
    upload(in.back()->get(), h.data(), bytes);
    srcs.push_back(in.back()->bytes() + sh.misalign * esize);
  }
  DeviceBuffer out(bytes ? bytes : 1);
  void* dst = sh.in_place ? const_cast<void*>(srcs[0]) : out.bytes() + sh.misalign * esize;
  auto& ex = dev().execution();
  auto s = ex.stream_create();
  ex.reduce(dst, srcs.data(), sh.nsrc, sh.count, t, op, s);
  ex.finalize(dst, sh.count, t, op, sh.nsrc, s);
  std::vector<char> got(sh.count * esize + 1);
  ex.copy(got.data(), dst, sh.count * esize, s);
  ex.stream_synchronize(s);
  ex.stream_destroy(s);
  for (size_t i = 0; i < sh.count; ++i) {
    std::vector<uint64_t> operands;
    for (auto& h : host) operands.push_back(element_bits(h.data() + sh.misalign * esize, i, t));
    uint64_t want = reference_reduce(t, op, operands);
    if (op == ReduceOp::avg) want = reference_divide(t, want, sh.nsrc);
    const uint64_t g = element_bits(got.data(), i, t);
    ASSERT_TRUE(same_element(t, g, want))
        << name(t) << " " << name(op) << " nsrc=" << sh.nsrc << " count=" << sh.count << " misalign=" << sh.misalign
        << (sh.in_place ? " in place" : "") << ": element " << i << " is 0x" << std::hex << g << ", want 0x" << want;
  }
}

TEST(Kernels, EveryTypeAndOpMatchesTheReference) {
  const Shape shapes[] = {{1, 33, 0, false},  {2, 0, 0, false},   {2, 1, 0, false},     {2, 1000, 0, true},
                          {3, 17, 1, false},  {3, 4099, 0, false}, {5, 515, 1, true},   {8, 63, 0, false},
                          {kMaxReduceSources, 257, 0, false},      {kMaxReduceSources, 70, 3, true}};
  std::mt19937_64 rng(11);
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int oi = 0; oi < kNumReduceOps; ++oi)
      for (const Shape& sh : shapes) {
        check_reduce(static_cast<DataType>(ti), static_cast<ReduceOp>(oi), sh, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// Every pair of fp8 codes (65536 elements): sums, products, max and min that overflow
// (saturating), underflow, meet NaN and infinity (e5m2), and their averages.
TEST(Kernels, EveryPairOfFp8Codes) {
  for (DataType t : {DataType::float8_e4m3, DataType::float8_e5m2}) {
    std::vector<uint8_t> a(65536), b(65536);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i), b[i] = static_cast<uint8_t>(i >> 8);
    DeviceBuffer da(a.size()), db(b.size()), out(a.size());
    upload(da.get(), a.data(), a.size());
    upload(db.get(), b.data(), b.size());
    for (int oi = 0; oi < kNumReduceOps; ++oi) {
      const auto op = static_cast<ReduceOp>(oi);
      const void* srcs[] = {da.get(), db.get()};
      dev().execution().reduce(out.get(), srcs, 2, a.size(), t, op, nullptr);
      dev().execution().finalize(out.get(), a.size(), t, op, 2, nullptr);
      const auto got = download<uint8_t>(out.get(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        uint64_t want = reference_reduce(t, op, {a[i], b[i]});
        if (op == ReduceOp::avg) want = reference_divide(t, want, 2);
        ASSERT_TRUE(same_element(t, got[i], want)) << name(t) << " " << name(op) << " of codes 0x" << std::hex
                                                   << int(a[i]) << " and 0x" << int(b[i]) << ": 0x" << int(got[i])
                                                   << ", want 0x" << want;
      }
    }
  }
}

// One source: each code to fp32 and back: itself, but NaN is a NaN and fp8's infinity
// saturates.
TEST(Kernels, EveryNarrowFloatCodeThroughTheAccumulator) {
  for (DataType t : {DataType::float16, DataType::bfloat16, DataType::float8_e4m3, DataType::float8_e5m2}) {
    const NarrowFormat& f = *narrow_format(t);
    const size_t n = size_t{1} << f.bits, esize = strata::size_of(t);
    std::vector<char> codes(n * esize);
    for (size_t i = 0; i < n; ++i) set_element_bits(codes.data(), i, t, i);
    DeviceBuffer in(codes.size()), out(codes.size());
    upload(in.get(), codes.data(), codes.size());
    const void* srcs[] = {in.get()};
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
      dev().execution().reduce(out.get(), srcs, 1, n, t, op, nullptr);
      const auto got = download<char>(out.get(), codes.size());
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(same_element(t, element_bits(got.data(), i, t), reference_reduce(t, op, {i})))
            << name(t) << " code 0x" << std::hex << i;
    }
  }
}

}  // namespace
}  // namespace strata_test
