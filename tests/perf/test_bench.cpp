// The shared benchmark loop and main() against in-process single-rank backends: a
// correct one (every collective on one rank is a copy) and one that corrupts results.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "coll_printer.hpp"
#include "bench.hpp"
#include "tool_main.hpp"

namespace perf {
namespace {

class LoopbackBackend : public Backend {
 public:
  std::string name() const override { return "loopback"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool supports(const Coll& c, DataType t, ReduceOp) const override {
    return !(c == Coll(P2p::sendrecv) && t == DataType::int64);
  }
  void run(const CollCall& c) override {
    ++calls;
    if (c.coll == Coll(P2p::pipeline)) return;  // one rank is both ends of the chain: nothing moves
    if (c.count && c.send != c.recv) std::memmove(c.recv, c.send, c.count * size_of(c.type));
    if (corrupt && c.count) static_cast<unsigned char*>(c.recv)[0] ^= 0x40;
  }
  void barrier() override {
    ++barriers;
    if (barrier_sleep.count()) std::this_thread::sleep_for(barrier_sleep);
  }
  double all_reduce(double v, ScalarOp) override { return v; }
  bool corrupt = false;
  long calls = 0, barriers = 0;
  std::chrono::microseconds barrier_sleep{0};
};

Options small(const Coll& c) {
  Options o;
  o.coll = c;
  o.min_bytes = 8;
  o.max_bytes = 4096;
  o.step_factor = 4;
  o.iters = 3;
  o.warmup_iters = 1;
  return o;
}

TEST(Bench, CorrectBackendPassesEveryCollective) {
  for (const Coll& c : all_colls()) {
    LoopbackBackend b;
    Options o = small(c);
    o.types = all_datatypes();
    o.ops = all_reduce_ops();
    RunSummary s;
    std::ostringstream out;
    EXPECT_EQ(run_benchmark(b, o, s, out), 0) << name(c) << "\n" << out.str();
    EXPECT_NE(out.str().find("# Out of bounds values : 0 OK"), std::string::npos);
    EXPECT_EQ(s.error_count, 0);
    const size_t combos = (has_op(c) ? 5 : 1) * (c == Coll(P2p::sendrecv) ? 9 : 10);
    EXPECT_EQ(s.rows.size(), combos * 5) << name(c);  // 8, 32, 128, 512, 2048 bytes
    if (busbw_factor(c, 1) > 0) {  // (n-1)/n is 0 on one rank
      EXPECT_GT(s.avg_busbw, 0.0) << name(c);
    }
    if (c == Coll(P2p::sendrecv)) {
      EXPECT_NE(out.str().find("# skipped: loopback"), std::string::npos);
    }
  }
}

TEST(Bench, RowsCarryTheTableKeys) {
  LoopbackBackend b;
  Options o = small(Collective::all_gather);
  o.types = {DataType::float64};
  RunSummary s;
  std::ostringstream out;
  ASSERT_EQ(run_benchmark(b, o, s, out), 0);
  ASSERT_EQ(s.rows.size(), 5u);
  EXPECT_EQ(s.rows[0].key.bytes, 8u);
  EXPECT_EQ(s.rows[0].key.count, 1u);
  EXPECT_EQ(s.rows[0].key.type, "double");
  EXPECT_EQ(s.rows[0].key.op, "none");
  EXPECT_EQ(s.rows[0].key.root, -1);
  EXPECT_TRUE(s.rows[0].out_of_place.checked);
  EXPECT_TRUE(s.rows[0].in_place.checked);
  // warmup 2x1, then per row and side: 1 untimed + 3 timed + 1 check.
  EXPECT_EQ(b.calls, 2 + 5 * 2 * 5);
  EXPECT_NE(out.str().find("  double    none      -1"), std::string::npos) << out.str();
}

TEST(Bench, WrongResultsAreCountedAndFail) {
  LoopbackBackend b;
  b.corrupt = true;
  Options o = small(Collective::all_reduce);
  RunSummary s;
  std::ostringstream out;
  EXPECT_EQ(run_benchmark(b, o, s, out), 1);
  EXPECT_EQ(s.error_count, 10);  // 5 sizes, out of place and in place
  for (const RowRecord& r : s.rows) {
    EXPECT_EQ(r.out_of_place.wrong, 1);
    EXPECT_EQ(r.in_place.wrong, 1);
  }
  EXPECT_NE(out.str().find("# Out of bounds values : 10 FAILED"), std::string::npos) << out.str();
}

TEST(Bench, NoCheckMeansNA) {
  LoopbackBackend b;
  b.corrupt = true;
  Options o = small(Collective::broadcast);
  o.check = 0;
  RunSummary s;
  std::ostringstream out;
  EXPECT_EQ(run_benchmark(b, o, s, out), 0);
  EXPECT_FALSE(s.rows[0].out_of_place.checked);
  EXPECT_NE(out.str().find("N/A"), std::string::npos);
}

// -z 1: a barrier after each timed call, then as many bare barriers timed on their own, so
// that time - barrier is the call's latency. Calls here take ~0; barriers sleep 1 ms.
TEST(Bench, BlockingAlsoTimesBareBarriers) {
  for (bool blocking : {false, true}) {
    LoopbackBackend b;
    b.barrier_sleep = std::chrono::microseconds(1000);
    Options o = small(Collective::reduce);
    o.max_bytes = 32;  // 8 and 32 bytes
    o.check = 0;
    o.blocking = blocking;
    RunSummary s;
    std::ostringstream out;
    ASSERT_EQ(run_benchmark(b, o, s, out), 0);
    ASSERT_EQ(s.rows.size(), 2u);
    // One before the warmups; per side one after the untimed call and one after the side.
    // With -z also one after each call (2 warmups; per side the untimed one and 3 timed)
    // and the 3 bare ones.
    EXPECT_EQ(b.barriers, 1 + (blocking ? 2 : 0) + 2 * 2 * (2 + (blocking ? 1 + 3 + 3 : 0))) << blocking;
    for (const RowRecord& r : s.rows) {
      for (const SideResult* side : {&r.out_of_place, &r.in_place}) {
        if (blocking) {
          EXPECT_GE(side->time_us, 1000.0);  // each call waits out the barrier after it
          EXPECT_GE(side->barrier_us, 1000.0);
        } else {
          EXPECT_LT(side->time_us, 1000.0);
          EXPECT_LT(side->barrier_us, 0.0);  // not measured: null in the JSON
        }
      }
    }
    const std::string json = results_json(s);
    EXPECT_EQ(json.find("\"oop_barrier_us\":null") != std::string::npos, !blocking) << json;
  }
}

int run_main(std::vector<std::string> args, bool corrupt = false) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = tool_main(static_cast<int>(argv.size()), argv.data(), {"fake-perf", "0", ""},
                           [corrupt](const Options&, int) -> std::unique_ptr<Backend> {
                             auto b = std::make_unique<LoopbackBackend>();
                             b->corrupt = corrupt;
                             return b;
                           });
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return rc;
}

TEST(ToolMain, ExitStatus) {
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "2"}), 0);
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "2"}, true), 1);
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-c", "0"}, true), 0);
  EXPECT_EQ(run_main({"fake-perf", "-h"}), 0);
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-x"}), 2);
  EXPECT_EQ(run_main({"fake-perf"}), 2);
  EXPECT_EQ(run_main({"fake-perf", "broadcast", "-r", "1", "-b", "8", "-e", "8"}), 2);  // 1-rank job
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-b", "8", "-e", "8", "--json", "/nonexistent/dir/x.json"}), 2);
  EXPECT_EQ(run_main({"fake-perf", "all_reduce", "-t", "2"}), 2) << "a tool without threads refuses -t 2";
}

TEST(ToolMain, WritesJson) {
  const std::string path = ::testing::TempDir() + "perf_tool_main.json";
  ASSERT_EQ(run_main({"fake-perf", "reduce", "-b", "8", "-e", "64", "-f", "8", "-o", "all", "--json", path}), 0);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("\"backend\":\"loopback\""), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"op\":\"avg\""), std::string::npos);
  EXPECT_NE(text.str().find("\"root\":0"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace perf
