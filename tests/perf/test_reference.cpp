// The reference check against a naive, in-test simulation of each collective over N
// ranks' buffers: correct results give #wrong == 0, a corrupted element is counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "numeric.hpp"
#include "reference.hpp"

namespace perf {
namespace {

struct Rank {
  std::vector<unsigned char> send, recv;
  CheckSpec spec;
};

// Runs collective `s` over `nranks` simulated ranks: prepares each rank's input with the
// library under test, then computes each result directly from the definition.
std::vector<Rank> simulate(Coll coll, DType t, RedOp op, int root, int nranks, size_t count, bool in_place) {
  const Layout l = layout_for(coll, count, nranks);
  const size_t es = size_of(t);
  const size_t bytes = (count + 16) * es;
  std::vector<Rank> ranks(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.send.assign(bytes, 0xAB);
    k.recv.assign(bytes, 0xCD);
    k.spec.coll = coll;
    k.spec.type = t;
    k.spec.op = op;
    k.spec.root = root;
    k.spec.rank = r;
    k.spec.nranks = nranks;
    k.spec.layout = l;
    k.spec.in_place = in_place;
    k.spec.seed = 5;
    prepare_input(k.spec, k.send.data(), k.recv.data());
  }
  // Snapshot every rank's input (what the call would read).
  std::vector<std::vector<double>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    const CallBuffers p = call_buffers(k.spec, k.send.data(), k.recv.data());
    for (size_t i = 0; i < l.send_count; ++i) in[static_cast<size_t>(r)].push_back(load(t, p.send, i));
  }
  auto reduce_at = [&](size_t i) {
    double acc = in[0][i];
    for (int r = 1; r < nranks; ++r) {
      const double v = in[static_cast<size_t>(r)][i];
      switch (op) {
        case RedOp::sum: case RedOp::avg: acc += v; break;
        case RedOp::prod: acc *= v; break;
        case RedOp::max: acc = std::max(acc, v); break;
        case RedOp::min: acc = std::min(acc, v); break;
      }
    }
    if (op == RedOp::avg) acc = is_floating(t) ? acc / nranks : std::trunc(acc / nranks);
    return acc;
  };
  const size_t c = l.param_count;
  for (int r = 0; r < nranks; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    void* out = call_buffers(k.spec, k.send.data(), k.recv.data()).recv;
    const size_t ur = static_cast<size_t>(r);
    for (size_t j = 0; j < l.recv_count; ++j) {
      double v = 0;
      switch (coll) {
        case Coll::all_reduce: v = reduce_at(j); break;
        case Coll::reduce_scatter: v = reduce_at(ur * c + j); break;
        case Coll::reduce:
          if (r != root) continue;  // leave non-roots untouched
          v = reduce_at(j);
          break;
        case Coll::all_gather: v = in[j / c][j % c]; break;
        case Coll::broadcast: v = in[static_cast<size_t>(root)][j]; break;
        case Coll::all_to_all: v = in[j / c][ur * c + j % c]; break;
        case Coll::sendrecv: v = in[static_cast<size_t>((r - 1 + nranks) % nranks)][j]; break;
        case Coll::pipeline:
          if (r == 0) continue;  // the first stage receives nothing
          v = in[static_cast<size_t>(r - 1)][j];
          break;
      }
      store(t, out, j, v);
    }
  }
  return ranks;
}

class ReferenceAllCollectives : public ::testing::TestWithParam<Coll> {};

TEST_P(ReferenceAllCollectives, CorrectResultsHaveNoWrongElements) {
  const Coll coll = GetParam();
  const std::vector<RedOp> ops = has_op(coll) ? all_redops() : std::vector<RedOp>{RedOp::sum};
  for (int nranks : {1, 2, 3, 4}) {
    for (DType t : all_dtypes()) {
      for (RedOp op : ops) {
        for (bool in_place : {false, true}) {
          if (in_place && !checks_in_place(coll)) continue;
          const int root = has_root(coll) ? nranks - 1 : -1;
          auto ranks = simulate(coll, t, op, root, nranks, 4 * 37 + 1, in_place);
          for (const Rank& k : ranks)
            EXPECT_EQ(count_wrong(k.spec, k.recv.data()), 0)
                << name(coll) << " " << name(t) << " " << name(op) << " n=" << nranks << " rank "
                << k.spec.rank << (in_place ? " in-place" : "");
        }
      }
    }
  }
}

TEST_P(ReferenceAllCollectives, WrongValueIsCounted) {
  const Coll coll = GetParam();
  for (bool in_place : {false, true}) {
    if (in_place && !checks_in_place(coll)) continue;
    const int nranks = 3;
    const int root = has_root(coll) ? 1 : -1;
    auto ranks = simulate(coll, DType::float32, RedOp::sum, root, nranks, 300, in_place);
    Rank& victim = ranks[1];
    void* out = call_buffers(victim.spec, victim.send.data(), victim.recv.data()).recv;
    store(DType::float32, out, 7, load(DType::float32, out, 7) + 1);
    store(DType::float32, out, 42, -1000);
    EXPECT_EQ(count_wrong(victim.spec, victim.recv.data()), 2) << name(coll) << (in_place ? " in-place" : "");
    EXPECT_EQ(count_wrong(ranks[0].spec, ranks[0].recv.data()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Perf, ReferenceAllCollectives,
                         ::testing::Values(Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather,
                                           Coll::broadcast, Coll::reduce, Coll::all_to_all, Coll::sendrecv,
                                           Coll::pipeline),
                         [](const auto& info) { return std::string(name(info.param)); });

TEST(Reference, MissingContributionIsDetected) {
  // An all_reduce that forgot rank 2's data must not pass.
  const int n = 3;
  const size_t count = 64;
  CheckSpec s;
  s.coll = Coll::all_reduce;
  s.type = DType::int32;
  s.nranks = n;
  s.layout = layout_for(s.coll, count, n);
  std::vector<int32_t> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = static_cast<int32_t>(reduce_input(RedOp::sum, 0, n, i) + reduce_input(RedOp::sum, 1, n, i));
  EXPECT_EQ(count_wrong(s, out.data()), static_cast<int64_t>(count));
}

TEST(Reference, ExpectedValuesAreExactInHalfAndBf16) {
  for (RedOp op : all_redops())
    for (int n : {2, 4, 8, 16})
      for (size_t i = 0; i < 200; ++i) {
        const double v = reduced_value(op, DType::half, n, i);
        EXPECT_EQ(round_to(DType::bfloat16, v), v) << name(op) << " n=" << n;
        EXPECT_EQ(round_to(DType::half, v), v);
        EXPECT_EQ(round_to(DType::int8, v), v);
      }
}

TEST(Reference, AvgFloatToleratesRoundingButNotErrors) {
  CheckSpec s;
  s.coll = Coll::all_reduce;
  s.type = DType::float32;
  s.op = RedOp::avg;
  s.nranks = 3;
  s.layout = layout_for(s.coll, 4, 3);
  std::vector<float> out(4);
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<float>(reduced_value(RedOp::avg, s.type, 3, i));
  out[1] = std::nextafter(out[1], 100.0f);  // one ulp off: a pre-multiplied sum may do that
  EXPECT_EQ(count_wrong(s, out.data()), 0);
  out[2] += 0.5f;
  EXPECT_EQ(count_wrong(s, out.data()), 1);
}

}  // namespace
}  // namespace perf
