// The reference check against a naive, in-test simulation of each collective over N
// ranks' buffers: correct results give #wrong == 0, a corrupted element is counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "coll_printer.hpp"
#include "numeric.hpp"
#include "options.hpp"
#include "reference.hpp"

namespace perf {
namespace {

// nccl's buffers, written out here (not from the library's geometry): the call's count and
// the elements each rank sends and receives, for a row of `elements`.
struct Counts {
  size_t call, send, recv;
};
Counts counts_of(const Coll& coll, size_t elements, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t block = elements / n;
  if (coll == Coll(Collective::reduce_scatter)) return {block, block * n, block};
  if (coll == Coll(Collective::all_gather)) return {block, block, block * n};
  if (coll == Coll(Collective::all_to_all)) return {block, block * n, block * n};
  return {elements, elements, elements};
}

struct Rank {
  std::vector<unsigned char> send, recv;
  CheckSpec spec;
};

// Runs collective `s` over `nranks` simulated ranks: prepares each rank's input with the
// library under test, then computes each result directly from the definition.
std::vector<Rank> simulate(Coll coll, DataType t, ReduceOp op, int root, int nranks, size_t elements, bool in_place) {
  const Counts l = counts_of(coll, elements, nranks);
  const size_t es = size_of(t);
  const size_t bytes = (elements + 16) * es;
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
    k.spec.count = l.call;
    k.spec.in_place = in_place;
    k.spec.seed = 5;
    prepare_input(k.spec, k.send.data(), k.recv.data());
  }
  // Snapshot every rank's input (what the call would read).
  std::vector<std::vector<double>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    const CallBuffers p = call_buffers(k.spec, k.send.data(), k.recv.data());
    for (size_t i = 0; i < l.send; ++i) in[static_cast<size_t>(r)].push_back(load(t, p.send, i));
  }
  auto reduce_at = [&](size_t i) {
    double acc = in[0][i];
    for (int r = 1; r < nranks; ++r) {
      const double v = in[static_cast<size_t>(r)][i];
      switch (op) {
        case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
        case ReduceOp::prod: acc *= v; break;
        case ReduceOp::max: acc = std::max(acc, v); break;
        case ReduceOp::min: acc = std::min(acc, v); break;
      }
    }
    if (op == ReduceOp::avg) acc = is_floating(t) ? acc / nranks : std::trunc(acc / nranks);
    return acc;
  };
  const size_t c = l.call;
  for (int r = 0; r < nranks; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    void* out = call_buffers(k.spec, k.send.data(), k.recv.data()).recv;
    const size_t ur = static_cast<size_t>(r);
    for (size_t j = 0; j < l.recv; ++j) {
      double v = 0;
      if (coll == Coll(Collective::all_reduce)) {
        v = reduce_at(j);
      } else if (coll == Coll(Collective::reduce_scatter)) {
        v = reduce_at(ur * c + j);
      } else if (coll == Coll(Collective::reduce)) {
        if (r != root) continue;  // leave non-roots untouched
        v = reduce_at(j);
      } else if (coll == Coll(Collective::all_gather)) {
        v = in[j / c][j % c];
      } else if (coll == Coll(Collective::broadcast)) {
        v = in[static_cast<size_t>(root)][j];
      } else if (coll == Coll(Collective::all_to_all)) {
        v = in[j / c][ur * c + j % c];
      } else if (coll == Coll(P2p::sendrecv)) {
        v = in[static_cast<size_t>((r - 1 + nranks) % nranks)][j];
      } else if (coll == Coll(P2p::pipeline)) {
        if (r == 0) continue;  // the first stage receives nothing
        v = in[static_cast<size_t>(r - 1)][j];
      } else {
        ADD_FAILURE() << "no simulation of " << name(coll);
      }
      store(t, out, j, v);
    }
  }
  return ranks;
}

class ReferenceAllCollectives : public ::testing::TestWithParam<Coll> {};

TEST_P(ReferenceAllCollectives, CorrectResultsHaveNoWrongElements) {
  const Coll coll = GetParam();
  const std::vector<ReduceOp> ops = has_op(coll) ? all_reduce_ops() : std::vector<ReduceOp>{ReduceOp::sum};
  for (int nranks : {1, 2, 3, 4}) {
    for (DataType t : all_datatypes()) {
      for (ReduceOp op : ops) {
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
    auto ranks = simulate(coll, DataType::float32, ReduceOp::sum, root, nranks, 300, in_place);
    Rank& victim = ranks[1];
    void* out = call_buffers(victim.spec, victim.send.data(), victim.recv.data()).recv;
    store(DataType::float32, out, 7, load(DataType::float32, out, 7) + 1);
    store(DataType::float32, out, 42, -1000);
    EXPECT_EQ(count_wrong(victim.spec, victim.recv.data()), 2) << name(coll) << (in_place ? " in-place" : "");
    EXPECT_EQ(count_wrong(ranks[0].spec, ranks[0].recv.data()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Perf, ReferenceAllCollectives, ::testing::ValuesIn(all_colls()),
                         [](const auto& info) { return std::string(name(info.param)); });

TEST(Reference, InPlacePointersFollowNccl) {
  // Rank 2 of 4, 10 floats per block: all_gather sends from its block of the receive
  // buffer, reduce_scatter receives into its block of the send buffer, the others use
  // one buffer for both.
  std::vector<float> send(64), recv(64);
  CheckSpec s;
  s.type = DataType::float32;
  s.rank = 2;
  s.nranks = 4;
  s.count = 10;
  s.in_place = true;
  s.coll = Collective::all_gather;
  CallBuffers p = call_buffers(s, send.data(), recv.data());
  EXPECT_EQ(p.send, recv.data() + 20);
  EXPECT_EQ(p.recv, recv.data());
  s.coll = Collective::reduce_scatter;
  p = call_buffers(s, send.data(), recv.data());
  EXPECT_EQ(p.send, recv.data());
  EXPECT_EQ(p.recv, recv.data() + 20);
  for (const Coll& c : {Coll(Collective::all_reduce), Coll(Collective::broadcast), Coll(Collective::reduce),
                        Coll(Collective::all_to_all), Coll(P2p::sendrecv), Coll(P2p::pipeline)}) {
    s.coll = c;
    p = call_buffers(s, send.data(), recv.data());
    EXPECT_EQ(p.send, recv.data()) << name(c);
    EXPECT_EQ(p.recv, recv.data()) << name(c);
  }
  s.in_place = false;
  p = call_buffers(s, send.data(), recv.data());
  EXPECT_EQ(p.send, send.data());
  EXPECT_EQ(p.recv, recv.data());
}

TEST(Reference, MissingContributionIsDetected) {
  // An all_reduce that forgot rank 2's data must not pass.
  const int n = 3;
  const size_t count = 64;
  CheckSpec s;
  s.coll = Collective::all_reduce;
  s.type = DataType::int32;
  s.nranks = n;
  s.count = count;
  std::vector<int32_t> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = static_cast<int32_t>(reduce_input(ReduceOp::sum, DataType::int32, 0, n, i) + reduce_input(ReduceOp::sum, DataType::int32, 1, n, i));
  EXPECT_EQ(count_wrong(s, out.data()), static_cast<int64_t>(count));
}

TEST(Reference, ExpectedValuesAreExactInHalfAndBf16) {
  for (ReduceOp op : all_reduce_ops())
    for (int n : {2, 4, 8, 16})
      for (size_t i = 0; i < 200; ++i) {
        const double v = reduced_value(op, DataType::float16, n, i);
        EXPECT_EQ(round_to(DataType::bfloat16, v), v) << name(op) << " n=" << n;
        EXPECT_EQ(round_to(DataType::float16, v), v);
        EXPECT_EQ(round_to(DataType::int8, v), v);
      }
}

// fp8's inputs keep every partial sum exact (any order of ranks is a subset sum) up to 8
// ranks in e5m2 and 16 in e4m3; max/min pick an input (rounding is monotonic).
TEST(Reference, Fp8InputsAndEveryPartialSumAreExact) {
  for (DataType t : {DataType::float8_e5m2, DataType::float8_e4m3})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod})
      for (int n = 1; n <= (t == DataType::float8_e5m2 ? 8 : 16); ++n)
        for (size_t i = 0; i < 64; ++i) {
          // The largest partial result: all inputs combined, each of them, and the ones
          // up to any rank (the ring's and the tree's partial sums are subsets of these
          // sizes; the inputs are 0..2, so the largest subset bounds them all).
          double acc = op == ReduceOp::prod ? 1 : 0;
          for (int r = 0; r < n; ++r) {
            const double v = reduce_input(op, t, r, n, i);
            EXPECT_EQ(round_to(t, v), v);
            acc = op == ReduceOp::prod ? acc * v : acc + v;
            EXPECT_EQ(round_to(t, acc), acc) << name(t) << " " << name(op) << " n=" << n << " i=" << i;
          }
          const double all = reduced_value(op, t, n, i);
          if (op != ReduceOp::avg) EXPECT_EQ(round_to(t, all), all);
        }
}

TEST(Reference, AvgFloatToleratesRoundingButNotErrors) {
  CheckSpec s;
  s.coll = Collective::all_reduce;
  s.type = DataType::float32;
  s.op = ReduceOp::avg;
  s.nranks = 3;
  s.count = 4;
  std::vector<float> out(4);
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<float>(reduced_value(ReduceOp::avg, s.type, 3, i));
  out[1] = std::nextafter(out[1], 100.0f);  // one ulp off: a pre-multiplied sum may do that
  EXPECT_EQ(count_wrong(s, out.data()), 0);
  out[2] += 0.5f;
  EXPECT_EQ(count_wrong(s, out.data()), 1);
}

}  // namespace
}  // namespace perf
