// Every reduction kernel (baseline and AVX2 builds) against a scalar reference written
// here: wrap-around integer arithmetic, fp32/fp64 directly, fp16 rounded by the compiler's
// _Float16 conversion, bf16 by nearest-even search, fp8 by the formats' reference. Lengths
// cover vector bodies and tails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ground/half.hpp"
#include "ground/reduce.hpp"
#include "strata/error.hpp"
#include "strata/strata.hpp"
#include "tests/common/narrow_float_reference.hpp"

namespace strata {
namespace generic {
ReduceFn reduce_fn(DataType type, ReduceOp op);
}
namespace avx2 {
ReduceFn reduce_fn(DataType type, ReduceOp op);
}

namespace {

template <typename T>
T ref_op(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
      else return a + b;
    case ReduceOp::prod:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<unsigned long long>(a) * static_cast<unsigned long long>(b));
      else return a * b;
    case ReduceOp::max: return a < b ? b : a;
    case ReduceOp::min: return b < a ? b : a;
  }
  return a;
}

uint16_t ref_half(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

uint16_t ref_bf16(float f) {
  uint32_t x = float_bits(f);
  uint16_t down = static_cast<uint16_t>(x >> 16), up = static_cast<uint16_t>(down + 1);
  double dd = std::fabs(static_cast<double>(bf16_to_float(down)) - f), du = std::fabs(static_cast<double>(bf16_to_float(up)) - f);
  return dd < du ? down : du < dd ? up : ((down & 1) ? up : down);
}

// Both forms of a kernel: in place (dst == a) and three operands (dst separate, a untouched).
template <typename T>
void apply_both(ReduceFn fn, std::vector<T>& d, const std::vector<T>& s, const char* what, size_t n) {
  std::vector<T> a = d, out(n);
  fn(out.data(), a.data(), s.data(), n);
  ASSERT_TRUE(a == d) << what << ": the three-operand form wrote its operand";
  fn(d.data(), d.data(), s.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::memcmp(&out[i], &d[i], sizeof(T)), 0) << what << ": the two forms differ at " << i;
}

template <typename T>
void check(ReduceFn fn, DataType t, ReduceOp op, size_t n, std::mt19937& rng) {
  std::vector<T> d(n), s(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      d[i] = static_cast<T>(rng()), s[i] = static_cast<T>(rng());
    } else {
      std::uniform_real_distribution<double> u(-100, 100);
      d[i] = static_cast<T>(u(rng)), s[i] = static_cast<T>(u(rng));
    }
  }
  std::vector<T> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = ref_op(d[i], s[i], op);
  apply_both(fn, d, s, name(t), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], want[i]) << name(t) << " " << name(op) << " n=" << n << " i=" << i;
}

// 8- and 16-bit floats: the reference widens both operands to fp32, applies the op and
// rounds back (fp16: the compiler's conversion; bf16: a nearest-even search; fp8: the
// formats' reference, tests/common/narrow_float_reference.hpp).
template <typename S, typename ToF, typename FromF>
void check_narrow(ReduceFn fn, DataType t, ReduceOp op, size_t n, std::mt19937& rng, ToF to_f, FromF from_f, float range) {
  std::uniform_real_distribution<float> u(-range, range);
  std::vector<S> d(n), s(n), want(n);
  for (size_t i = 0; i < n; ++i) d[i] = from_f(u(rng)), s[i] = from_f(u(rng));
  for (size_t i = 0; i < n; ++i) want[i] = from_f(ref_op(to_f(d[i]), to_f(s[i]), op));
  apply_both(fn, d, s, name(t), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], want[i]) << name(t) << " " << name(op) << " n=" << n << " i=" << i;
}

void check_fp8(ReduceFn fn, DataType t, ReduceOp op, size_t n, std::mt19937& rng) {
  const strata_test::NarrowFormat& f = *strata_test::narrow_format(t);
  auto to_f = [&](uint8_t c) { return static_cast<float>(strata_test::narrow_decode(f, c)); };
  auto from_f = [&](float x) { return static_cast<uint8_t>(strata_test::narrow_encode(f, x)); };
  // Ranges where sums and products also overflow (and saturate).
  check_narrow<uint8_t>(fn, t, op, n, rng, to_f, from_f, t == DataType::float8_e4m3 ? 300.0f : 40000.0f);
}

void check_table(ReduceFn (*table)(DataType, ReduceOp)) {
  std::mt19937 rng(3);
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int oi = 0; oi < kNumReduceOps; ++oi)
      for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 1000}) {
        auto t = static_cast<DataType>(ti);
        auto op = static_cast<ReduceOp>(oi);
        ReduceFn fn = table(t, op);
        switch (t) {
          case DataType::int8: check<int8_t>(fn, t, op, n, rng); break;
          case DataType::uint8: check<uint8_t>(fn, t, op, n, rng); break;
          case DataType::int32: check<int32_t>(fn, t, op, n, rng); break;
          case DataType::uint32: check<uint32_t>(fn, t, op, n, rng); break;
          case DataType::int64: check<int64_t>(fn, t, op, n, rng); break;
          case DataType::uint64: check<uint64_t>(fn, t, op, n, rng); break;
          case DataType::float32: check<float>(fn, t, op, n, rng); break;
          case DataType::float64: check<double>(fn, t, op, n, rng); break;
          case DataType::float16: check_narrow<uint16_t>(fn, t, op, n, rng, half_to_float, ref_half, 60.0f); break;
          case DataType::bfloat16: check_narrow<uint16_t>(fn, t, op, n, rng, bf16_to_float, ref_bf16, 60.0f); break;
          case DataType::float8_e4m3:
          case DataType::float8_e5m2: check_fp8(fn, t, op, n, rng); break;
        }
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// avg's last step: integers divide truncating (also by more ranks than an 8-bit type
// holds), floats in their accumulation type (fp32 for 8/16 bits) rounded back.
template <typename T>
void check_divide(DataType t, int nranks, std::mt19937& rng) {
  std::vector<T> v(100);
  for (auto& x : v) x = static_cast<T>(rng());
  std::vector<T> got = v;
  finalize(got.data(), got.size(), t, ReduceOp::avg, nranks);
  for (size_t i = 0; i < v.size(); ++i) {
    T want;
    if (const auto* f = strata_test::narrow_format(t)) {
      const float x = static_cast<float>(strata_test::narrow_decode(*f, v[i]));
      if (std::isnan(x)) {
        EXPECT_TRUE(strata_test::narrow_is_nan(*f, got[i])) << name(t) << ": NaN stays NaN";
        continue;
      }
      want = static_cast<T>(strata_test::narrow_encode(*f, x / static_cast<float>(nranks)));
    } else if constexpr (std::is_integral_v<T>) {
      using Wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
      want = static_cast<T>(static_cast<Wide>(v[i]) / static_cast<Wide>(nranks));
    } else {
      want = v[i] / static_cast<T>(nranks);
    }
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(v[i])) continue;
    ASSERT_EQ(got[i], want) << name(t) << " nranks=" << nranks << " i=" << i;
  }
}

TEST(Reduce, FinalizeDividesByTheRankCount) {
  std::mt19937 rng(5);
  for (int nranks : {1, 3, 7, 200})
    for (int ti = 0; ti < kNumDataTypes; ++ti) {
      const auto t = static_cast<DataType>(ti);
      switch (t) {
        case DataType::int8: check_divide<int8_t>(t, nranks, rng); break;
        case DataType::uint8: check_divide<uint8_t>(t, nranks, rng); break;
        case DataType::int32: check_divide<int32_t>(t, nranks, rng); break;
        case DataType::uint32: check_divide<uint32_t>(t, nranks, rng); break;
        case DataType::int64: check_divide<int64_t>(t, nranks, rng); break;
        case DataType::uint64: check_divide<uint64_t>(t, nranks, rng); break;
        case DataType::float32: check_divide<float>(t, nranks, rng); break;
        case DataType::float64: check_divide<double>(t, nranks, rng); break;
        case DataType::float16:
        case DataType::bfloat16: check_divide<uint16_t>(t, nranks, rng); break;
        case DataType::float8_e4m3:
        case DataType::float8_e5m2: check_divide<uint8_t>(t, nranks, rng); break;
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Reduce, BaselineKernelsMatchTheReference) { check_table(generic::reduce_fn); }

TEST(Reduce, Avx2KernelsMatchTheReference) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no AVX2/F16C";
  check_table(avx2::reduce_fn);
}


// strata::scale: each element times the factor, as the reference's product (in place and
// not), over lengths that cross its internal blocks of factors.
template <typename T>
void check_scale(DataType t, std::mt19937& rng) {
  constexpr size_t n = 9001;  // > two 4 KiB blocks of one-byte elements
  std::vector<T> x(n), out(n), want(n);
  T factor;
  // fp16, bf16 and fp8: the product of the two values, rounded once (fp8 saturating).
  const strata_test::NarrowFormat* narrow = strata_test::narrow_format(t);
  auto to_f = [&](T v) { return strata_test::narrow_decode(*narrow, static_cast<uint32_t>(v)); };
  auto from_f = [&](double f) { return static_cast<T>(strata_test::narrow_encode(*narrow, f)); };
  auto draw = [&]() -> T {
    if constexpr (std::is_integral_v<T>) {
      if (narrow) return from_f(std::uniform_real_distribution<double>(narrow->bits == 8 ? -24 : -60, narrow->bits == 8 ? 24 : 60)(rng));
      return static_cast<T>(rng());
    } else {
      return static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    }
  };
  for (T& v : x) v = draw();
  factor = draw();
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>)
      want[i] = narrow ? from_f(to_f(x[i]) * to_f(factor)) : ref_op(x[i], factor, ReduceOp::prod);
    else
      want[i] = x[i] * factor;
  }
  scale(out.data(), x.data(), n, t, &factor);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::memcmp(&out[i], &want[i], sizeof(T)), 0) << name(t) << " i=" << i;
  scale(x.data(), x.data(), n, t, &factor);
  ASSERT_EQ(std::memcmp(x.data(), want.data(), n * sizeof(T)), 0) << name(t) << " in place";
}

TEST(Scale, EveryTypeMatchesTheReferenceProduct) {
  std::mt19937 rng(5);
  for (int ti = 0; ti < kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    switch (t) {
      case DataType::int8: check_scale<int8_t>(t, rng); break;
      case DataType::uint8: check_scale<uint8_t>(t, rng); break;
      case DataType::int32: check_scale<int32_t>(t, rng); break;
      case DataType::uint32: check_scale<uint32_t>(t, rng); break;
      case DataType::int64: check_scale<int64_t>(t, rng); break;
      case DataType::uint64: check_scale<uint64_t>(t, rng); break;
      case DataType::float32: check_scale<float>(t, rng); break;
      case DataType::float64: check_scale<double>(t, rng); break;
      case DataType::float16:
      case DataType::bfloat16: check_scale<uint16_t>(t, rng); break;
      case DataType::float8_e4m3:
      case DataType::float8_e5m2: check_scale<uint8_t>(t, rng); break;
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Scale, RefusesBadArguments) {
  float x = 1, f = 2;
  EXPECT_THROW(scale(&x, &x, 1, static_cast<DataType>(42), &f), InvalidArgument);
  EXPECT_THROW(scale(nullptr, &x, 1, DataType::float32, &f), InvalidArgument);
  EXPECT_THROW(scale(&x, &x, 1, DataType::float32, nullptr), InvalidArgument);
  EXPECT_NO_THROW(scale(nullptr, nullptr, 0, DataType::float32, nullptr));  // nothing to do
}

}  // namespace
}  // namespace strata
