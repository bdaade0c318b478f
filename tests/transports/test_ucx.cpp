// UCX transport: the multi-rank collective suite (strata-test-worker under strata-run) with
// STRATA_TRANSPORT=ucx over UCX's shared memory and over its tcp on loopback; a rank killed
// mid all_reduce; zero-copy sends off over tcp unless the user chose; the default choice
// between hosts without RDMA; a STRATA_TRANSPORT that differs between ranks.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "failure_job.hpp"
#include "worker_job.hpp"

using namespace strata_test;

namespace {

const std::map<std::string, std::string> kUcxSm{{"STRATA_TRANSPORT", "ucx"}, {"UCX_TLS", "sm,self"}};
const std::map<std::string, std::string> kUcxTcp{
    {"STRATA_TRANSPORT", "ucx"}, {"UCX_TLS", "tcp,self"}, {"UCX_NET_DEVICES", "lo"}};


struct Config {
  std::string name;
  int n;
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
};

std::ostream& operator<<(std::ostream& o, const Config& c) { return o << c.name; }

class UcxCollectives : public ::testing::TestWithParam<Config> {};

TEST_P(UcxCollectives, AllRanksPass) {
  const Config& c = GetParam();
  std::map<std::string, std::string> env = c.env;
  env["STRATA_TIMEOUT"] = "60";
  expect_worker_job_passes(c.name, c.n, env, {}, c.args, 240);
}

std::vector<Config> configs() {
  std::vector<Config> v;
  // Over UCX's shared memory (posix/sysv FIFOs for tag messages, puts into posix segments
  // for chunks of 16 KiB and more).
  v.push_back({"sm_n2", 2, kUcxSm, {"--quick", "--medium"}});
  v.push_back({"sm_n3", 3, kUcxSm, {"--quick", "--medium"}});
  v.push_back({"sm_n4", 4, kUcxSm, {"--quick", "--medium"}});
  v.push_back({"sm_n7", 7, kUcxSm, {"--quick"}});
  v.push_back({"sm_big_n2", 2, kUcxSm, {"--big", "--colls=all_reduce,all_gather,broadcast"}});
  // Tag messages only, small ones and a single staging chunk: many chunks per transfer,
  // reducing receives that wait for the staging buffer.
  v.push_back({"sm_tiny_n3", 3,
               with(kUcxSm, {{"STRATA_UCX_PUTS", "0"}, {"STRATA_UCX_CHUNK_BYTES", "4096"},
                             {"STRATA_UCX_STAGING_CHUNKS", "1"}, {"STRATA_CHUNK_BYTES", "4096"}}),
               {"--quick", "--medium", "--no-misc"}});
  // Puts of 16 KiB chunks into a single slot: every put waits for the credit of the one
  // before, and transfers end with a chunk small enough to go as a tag message.
  v.push_back({"sm_puts_one_slot_n3", 3,
               with(kUcxSm, {{"STRATA_UCX_PUT_CHUNK_BYTES", "16384"}, {"STRATA_UCX_STAGING_CHUNKS", "1"}}),
               {"--quick", "--medium", "--no-misc"}});
  // Without puts: large chunks go by rendezvous (cma).
  v.push_back({"sm_no_puts_n3", 3, with(kUcxSm, {{"STRATA_UCX_PUTS", "0"}}), {"--quick", "--medium"}});
  // Over UCX's tcp on loopback.
  v.push_back({"tcp_n2", 2, kUcxTcp, {"--quick", "--medium"}});
  v.push_back({"tcp_n3", 3, kUcxTcp, {"--quick"}});
  v.push_back({"tcp_n4", 4, kUcxTcp, {"--quick", "--medium"}});
  v.push_back({"tcp_big_n3", 3, kUcxTcp, {"--big", "--colls=all_reduce,reduce_scatter"}});
  // Puts forced over tcp: the path RDMA would take (put, flush, notice), run here by UCX's
  // tcp transport.
  v.push_back({"tcp_puts_n3", 3, with(kUcxTcp, {{"STRATA_UCX_PUTS", "1"}}), {"--quick", "--medium"}});
  // Each algorithm forced, so every plan shape runs over ucx.
  for (std::string algo : {"ring", "tree", "recursive_doubling", "direct"})
    v.push_back({"sm_algo_" + algo + "_n3", 3, with(kUcxSm, {{"STRATA_ALGO", algo}}), {"--quick", "--no-misc"}});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Run, UcxCollectives, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return i.param.name; });

// ---------------------------------------------------------------- ranks spawned directly


// Same host: UCX's shared memory has no peer-failure support, so the engine's control
// sockets catch the dead process.
TEST(UcxFailure, KilledRankOverSharedMemory) { expect_killed_rank_reported(kUcxSm, {}); }

std::vector<std::map<std::string, std::string>> distinct_hosts(int n, const std::string& prefix) {
  std::vector<std::map<std::string, std::string>> hosts;
  for (int r = 0; r < n; ++r) hosts.push_back({{"STRATA_HOST", prefix + std::to_string(r)}});
  return hosts;
}

// Each rank a different "host" (STRATA_HOST): endpoints use UCP_ERR_HANDLING_MODE_PEER over
// tcp, so UCX itself reports the lost peer too. With zero-copy sends (UCX's default), UCX
// 1.13 aborted a survivor in 3-8% of runs here (uct_iface.h:884 "comp->count > 0"), which
// is why Strata turns them off where UCX may use tcp. One run proves little: repeat it
// (--gtest_repeat=100) after changing the UCX transport.
TEST(UcxFailure, KilledRankOverTcpBetweenHosts) { expect_killed_rank_reported(kUcxTcp, distinct_hosts(4, "ucx-host-")); }

// UCX over tcp between ranks of one host (UCX_TLS=tcp,self): issue 20, defect 7.
TEST(UcxFailure, KilledRankOverTcpOnOneHost) { expect_killed_rank_reported(kUcxTcp, {}); }

// abort() from another thread while rank 0 waits in an all_reduce: the waiter wakes with
// an error, ranks 1 and 2 fail promptly naming rank 0, nobody crashes in UCX teardown.
TEST(UcxFailure, AbortWakesWaiterAndPeers) {
  Job j = spawn({STRATA_FAILURE_WORKER_PATH, "abort"}, 3, with(kUcxSm, {{"STRATA_TIMEOUT", "20"}}), {}, 40);
  std::cout << "wall " << j.wall_s << " s\n";
  for (int r = 0; r < 3; ++r) {
    const ProcResult& p = j.ranks[r];
    std::string caught = marker_line(p, "CAUGHT");
    std::cout << "rank " << r << ": " << p.describe() << "\n  " << caught << "\n";
    EXPECT_FALSE(p.killed_by_deadline) << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code == 3) << "rank " << r << ": " << p.describe() << "\n" << j.dump();
    ASSERT_FALSE(caught.empty()) << j.dump();
    if (r > 0) {
      EXPECT_TRUE(names_rank(field(caught, "msg"), 0)) << caught;
      EXPECT_LT(num(field(caught, "after")), 5.0) << caught;
    }
    EXPECT_TRUE(marker_line(p, "WRONG-RESULT").empty()) << j.dump();
    EXPECT_FALSE(marker_line(p, "DESTROY-RETURNED").empty() && marker_line(p, "DESTROY-THREW").empty()) << j.dump();
  }
}

// Zero-copy sends are off over tcp (said at INFO level), unless the user set
// UCX_ZCOPY_THRESH: Strata never overrides a UCX_* variable.
TEST(UcxTcpZeroCopy, OffUnlessTheUserChose) {
  const std::string said = "zero-copy sends off";
  for (bool user_set : {false, true}) {
    auto env = with(kUcxTcp, {{"STRATA_DEBUG", "INFO"}, {"STRATA_TIMEOUT", "30"}});
    if (user_set) env["UCX_ZCOPY_THRESH"] = "16K";
    Job j = spawn({STRATA_WORKER_PATH, "--quick", "--no-misc", "--colls=all_reduce", "--types=float", "--ops=sum"}, 2,
                  env, distinct_hosts(2, "zcopy-"), 60);
    for (int r = 0; r < 2; ++r) {
      const ProcResult& p = j.ranks[r];
      ASSERT_TRUE(p.exited && p.exit_code == 0) << j.dump();
      EXPECT_FALSE(lines_containing(p.out + p.err, "via ucx").empty()) << j.dump();
      EXPECT_EQ(lines_containing(p.out + p.err, said).size(), user_set ? 0u : 1u)
          << "UCX_ZCOPY_THRESH " << (user_set ? "set" : "unset") << "\n" << j.dump();
    }
  }
}

// UCX_TLS without tcp: zero-copy stays on.
TEST(UcxTcpZeroCopy, OnWithoutTcp) {
  Job j = spawn({STRATA_WORKER_PATH, "--quick", "--no-misc", "--colls=all_reduce", "--types=float", "--ops=sum"}, 2,
                with(kUcxSm, {{"STRATA_DEBUG", "INFO"}, {"STRATA_TIMEOUT", "30"}}), {}, 60);
  for (int r = 0; r < 2; ++r) {
    const ProcResult& p = j.ranks[r];
    ASSERT_TRUE(p.exited && p.exit_code == 0) << j.dump();
    EXPECT_TRUE(lines_containing(p.out + p.err, "zero-copy sends off").empty()) << j.dump();
  }
}

// Between hosts without RDMA the default stays tcp, and the INFO log says why.
TEST(UcxSelection, DefaultBetweenHostsWithoutRdmaIsTcp) {
  Job j = spawn({STRATA_WORKER_PATH, "--quick", "--no-misc", "--colls=all_reduce", "--types=float", "--ops=sum"}, 2,
                {{"STRATA_DEBUG", "INFO"}, {"STRATA_TIMEOUT", "30"}}, distinct_hosts(2, "sel-"), 60);
  for (int r = 0; r < 2; ++r) {
    const ProcResult& p = j.ranks[r];
    std::string all = p.out + p.err;
    ASSERT_TRUE(p.exited && p.exit_code == 0) << j.dump();
    EXPECT_FALSE(lines_containing(all, "via tcp").empty()) << j.dump();
    EXPECT_TRUE(lines_containing(all, "via ucx").empty()) << j.dump();
    EXPECT_FALSE(lines_containing(all, "no RDMA-capable device").empty()) << "no INFO line about UCX\n" << j.dump();
    // Said once per process, not per communicator or peer.
    EXPECT_EQ(lines_containing(all, "the ibverbs transport is not available").size(), 1u) << j.dump();
  }
}

// STRATA_TRANSPORT=ucx on one rank only: every rank fails creation with an error naming
// the difference, none hangs or crashes.
TEST(UcxSelection, TransportMismatchBetweenRanksIsAClearError) {
  Job j = spawn({STRATA_WORKER_PATH, "--quick"}, 3, {{"STRATA_TIMEOUT", "20"}}, {{}, {{"STRATA_TRANSPORT", "ucx"}}}, 40);
  for (int r = 0; r < 3; ++r) {
    const ProcResult& p = j.ranks[r];
    std::string all = p.out + p.err;
    EXPECT_FALSE(p.killed_by_deadline) << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code != 0) << j.dump();
    EXPECT_NE(all.find("STRATA_TRANSPORT is"), std::string::npos) << j.dump();
    EXPECT_NE(all.find("set the same value on every rank"), std::string::npos) << j.dump();
  }
}

// Put slots of another shape on one rank are refused on both ends of its links, naming the
// variables: a sender cutting larger slots would write past the receiver's region.
TEST(UcxSelection, PutSlotsThatDifferBetweenRanksAreAClearError) {
  Job j = spawn({STRATA_WORKER_PATH, "--quick"}, 2, with(kUcxSm, {{"STRATA_TIMEOUT", "20"}}),
                {{}, {{"STRATA_UCX_PUT_CHUNK_BYTES", "1M"}}}, 40);
  for (int r = 0; r < 2; ++r) {
    const ProcResult& p = j.ranks[r];
    EXPECT_FALSE(p.killed_by_deadline) << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code != 0) << j.dump();
    EXPECT_NE((p.out + p.err).find("set the same STRATA_UCX_PUT_CHUNK_BYTES and STRATA_UCX_STAGING_CHUNKS"),
              std::string::npos)
        << j.dump();
  }
}

// A STRATA_UCX_PUTS UCX would not understand is refused on every rank, naming the variable.
TEST(UcxSelection, BadPutsSettingIsAClearError) {
  Job j = spawn({STRATA_WORKER_PATH, "--quick"}, 2, with(kUcxSm, {{"STRATA_UCX_PUTS", "yes"}, {"STRATA_TIMEOUT", "20"}}),
                {}, 40);
  for (int r = 0; r < 2; ++r) {
    const ProcResult& p = j.ranks[r];
    EXPECT_FALSE(p.killed_by_deadline) << j.dump();
    EXPECT_TRUE(p.exited && p.exit_code != 0) << j.dump();
    EXPECT_NE((p.out + p.err).find("is not one of: auto, 0, 1"), std::string::npos) << j.dump();
  }
}

}  // namespace
