// ibverbs with the real library: clean refusal without a device (this machine), and tests
// that need a device, which skip with a message when ibv_get_device_list finds none.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "ground/settings.hpp"
#include "ground/reduce.hpp"
#include "strata/error.hpp"
#include "strata/strata.hpp"
#include "tests/common/process.hpp"
#include "transports/link_setup.hpp"

using namespace strata_test;

namespace {

// Sets environment variables for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (auto& [k, v] : kv) {
      const char* old = getenv(k);
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      setenv(k, v, 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_)
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

#define SKIP_WITH_DEVICE()                                                                                  \
  if (strata::kIbverbsTransport.offers())                                                                     \
  GTEST_SKIP() << "an RDMA device is present: the refusal without a device is not what happens here"
#define SKIP_WITHOUT_DEVICE()                                                                               \
  if (!strata::kIbverbsTransport.offers())                                                                    \
  GTEST_SKIP() << "no RDMA device (ibv_get_device_list found none, or no active port matches STRATA_IB_HCA): " \
                  "device test not run"

}  // namespace

TEST(IbverbsRefusal, ForcedWithoutDeviceThrowsSystemError) {
  SKIP_WITH_DEVICE();
  ScopedEnv env{{"STRATA_TRANSPORT", "ibverbs"}};
  try {
    strata::Comm c = strata::Comm::init_rank(1, strata::get_unique_id(), 0);
    FAIL() << "communicator created with STRATA_TRANSPORT=ibverbs and no device";
  } catch (const strata::SystemError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("STRATA_TRANSPORT=ibverbs"), std::string::npos) << m;
    EXPECT_NE(m.find("no usable RDMA device"), std::string::npos) << m;
  }
}

TEST(IbverbsRefusal, MalformedHcaListIsInvalidArgument) {
  ScopedEnv env{{"STRATA_TRANSPORT", "ibverbs"}, {"STRATA_IB_HCA", "mlx5_0:x"}};
  try {
    strata::Comm c = strata::Comm::init_rank(1, strata::get_unique_id(), 0);
    FAIL() << "accepted STRATA_IB_HCA=mlx5_0:x";
  } catch (const strata::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("STRATA_IB_HCA"), std::string::npos) << e.what();
  }
}

// Two real processes: both fail creation with the message and a normal exit, no signal.
TEST(IbverbsRefusal, ForcedWithoutDeviceFailsEveryRankCleanly) {
  SKIP_WITH_DEVICE();
  auto r = run_one({STRATA_RUN_PATH, "-n", "2", "--", STRATA_WORKER_PATH, "--quick"},
                   {{"STRATA_TRANSPORT", "ibverbs"}, {"STRATA_TIMEOUT", "20"}}, 60);
  EXPECT_FALSE(r.killed_by_deadline) << r.out;
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.describe() << "\n" << r.out;
  auto lines = lines_containing(r.out, "no usable RDMA device");
  EXPECT_FALSE(lines.empty()) << tail(r.out);
  EXPECT_TRUE(lines_containing(r.out, "Segmentation").empty()) << tail(r.out);
}

// ---- with a device

TEST(IbverbsDevice, LoopbackLinkTransfersAndReduces) {
  SKIP_WITHOUT_DEVICE();
  strata::Config cfg = strata::Config::from_env();
  strata::SetupContext ca, cb;
  ca.rank = 0, cb.rank = 1;
  ca.nranks = cb.nranks = 2;
  ca.cfg = cb.cfg = &cfg;
  ca.peers = {1}, cb.peers = {0};
  ca.same_host = cb.same_host = {true, true};
  auto a = strata::kIbverbsTransport.create(ca);
  auto b = strata::kIbverbsTransport.create(cb);
  std::vector<char> ia = a->local_info(1), ib = b->local_info(0);
  auto la = a->connect(1, ib);
  auto lb = b->connect(0, ia);
  const size_t n = (8 << 20) / sizeof(float) + 13;
  std::vector<float> x(n), y(n), z(n, 0.f), w(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 977), y[i] = static_cast<float>(i % 13), w[i] = 1.f;
  la->post_send(x.data(), n * sizeof(float));
  lb->post_recv(z.data(), n * sizeof(float), {});
  lb->post_send(y.data(), n * sizeof(float));
  la->post_recv(w.data(), n * sizeof(float), strata::Reduction::on_host(strata::reduce_fn(strata::DataType::float32, strata::ReduceOp::sum), sizeof(float), reinterpret_cast<const char*>(w.data()), false));
  auto t0 = now_s();
  while (!(la->idle() && lb->idle())) {
    la->progress();
    lb->progress();
    ASSERT_LT(now_s() - t0, 30.0) << "no progress over the loopback queue pairs";
  }
  EXPECT_EQ(z, x);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i], 1.f + y[i]) << i;
}

TEST(IbverbsDevice, CollectivesOverIbverbs) {
  SKIP_WITHOUT_DEVICE();
  for (int n : {2, 3}) {
    auto r = run_one({STRATA_RUN_PATH, "-n", std::to_string(n), "--", STRATA_WORKER_PATH, "--quick", "--medium"},
                     {{"STRATA_TRANSPORT", "ibverbs"}, {"STRATA_TIMEOUT", "60"}}, 240);
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << tail(r.out);
    EXPECT_EQ(static_cast<int>(lines_containing(r.out, " 0 failed").size()), n) << tail(r.out);
  }
}
