// Launcher detection (core/bootstrap/launch_env): each launcher's variables, set as that
// launcher sets them (the sets below were read from real runs: torch 1.13's torchrun,
// OpenMPI 4.1's mpirun, Slurm 22.05's srun), give the right rank, size, local rank and
// root; partial or malformed sets are errors naming the variable. Also the id exchange
// through a file, and the derived secret's hash against SipHash's published vectors.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/bootstrap/id_exchange.hpp"
#include "core/bootstrap/launch_env.hpp"
#include "core/bootstrap/unique_id.hpp"

namespace strata::bootstrap {
namespace {

using Vars = std::map<std::string, std::string>;

Env env_of(const Vars& vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

Launch found(const Vars& vars, bool pmix = false) {
  auto l = find_launch(env_of(vars), pmix);
  if (!l) throw std::runtime_error("no launch found");
  return *l;
}

// The message of the InvalidArgument find_launch throws ("" if it does not throw).
std::string refusal(const Vars& vars, bool pmix = false) {
  try {
    find_launch(env_of(vars), pmix);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

const Vars kTorchrun = {{"RANK", "5"},          {"WORLD_SIZE", "8"},        {"LOCAL_RANK", "1"},
                        {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},        {"MASTER_ADDR", "10.1.2.3"},
                        {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "run42"}};

const Vars kMpirun = {{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                      {"OMPI_MCA_ess_base_jobid", "297795585"}, {"PMIX_RANK", "2"},
                      {"PMIX_NAMESPACE", "297795585"}};

const Vars kSrun = {{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "8"},      {"SLURM_STEP_NUM_TASKS", "8"},
                    {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "1"},      {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                    {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                    {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "3"}};

Vars with(Vars base, const Vars& changes) {
  for (const auto& [k, v] : changes) base[k] = v;
  return base;
}

TEST(LaunchEnv, NoLauncherIsNoLaunch) {
  EXPECT_FALSE(find_launch(env_of({}), true).has_value());
  EXPECT_FALSE(find_launch(env_of({{"SLURM_JOB_ID", "7"}, {"MASTER_ADDR", "x"}}), true).has_value());
}

TEST(LaunchEnv, StrataRun) {
  Launch l = found({{"STRATA_RANK", "1"},
                    {"STRATA_WORLD_SIZE", "3"},
                    {"STRATA_LOCAL_RANK", "1"},
                    {"STRATA_LOCAL_SIZE", "3"},
                    {"STRATA_ROOT", "127.0.0.1:4000"}});
  EXPECT_EQ(l.launcher, "strata-run");
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 3);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 3);
  EXPECT_EQ(l.rendezvous, Rendezvous::address);
  EXPECT_EQ(l.root, "127.0.0.1:4000");
  EXPECT_FALSE(l.derived);
}

TEST(LaunchEnv, Torchrun) {
  Launch l = found(kTorchrun, true);
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.size, 8);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 4);
  EXPECT_EQ(l.rendezvous, Rendezvous::address);
  EXPECT_EQ(l.root, "10.1.2.3:29501");  // torch's store keeps MASTER_PORT
  EXPECT_TRUE(l.derived);
  EXPECT_EQ(l.job_id, "run42@10.1.2.3:29500");
  EXPECT_EQ(found(with(kTorchrun, {{"STRATA_ROOT_PORT", "40000"}})).root, "10.1.2.3:40000");
  EXPECT_EQ(found(with(kTorchrun, {{"STRATA_ROOT_PORT", "0"}})).root, "10.1.2.3:29501");
  EXPECT_EQ(found(with(kTorchrun, {{"MASTER_ADDR", "::1"}})).root, "[::1]:29501");
  EXPECT_EQ(found(with(kTorchrun, {{"STRATA_ROOT", "h:1"}})).root, "h:1");  // the user's choice first
  EXPECT_FALSE(found(with(kTorchrun, {{"STRATA_ROOT", "h:1"}})).derived);
}

TEST(LaunchEnv, TorchrunPartialOrMalformed) {
  EXPECT_NE(refusal(with(kTorchrun, {{"WORLD_SIZE", ""}})).find("WORLD_SIZE must be set"), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"MASTER_PORT", ""}})).find("MASTER_PORT"), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"MASTER_ADDR", ""}})).find("MASTER_ADDR"), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"RANK", "8"}})).find("RANK=8 "), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"RANK", "two"}})).find("RANK=two "), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"LOCAL_WORLD_SIZE", "9"}})).find("LOCAL_WORLD_SIZE"), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"MASTER_PORT", "65535"}})).find("MASTER_PORT"), std::string::npos);
  EXPECT_NE(refusal(with(kTorchrun, {{"STRATA_ROOT_PORT", "70000"}})).find("STRATA_ROOT_PORT"), std::string::npos);
}

TEST(LaunchEnv, MpirunUsesPmixWhenBuiltWithIt) {
  Launch l = found(kMpirun, true);
  EXPECT_EQ(l.launcher, "mpirun");
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 2);
  EXPECT_EQ(l.local_size, 4);
  EXPECT_EQ(l.rendezvous, Rendezvous::pmix);
  EXPECT_EQ(l.job_id, "297795585");
}

TEST(LaunchEnv, MpirunWithoutPmix) {
  // One host: a file in the temporary directory, named by the job.
  Launch l = found(with(kMpirun, {{"TMPDIR", "/scratch"}}), false);
  EXPECT_EQ(l.rendezvous, Rendezvous::file);
  EXPECT_EQ(l.root, "/scratch/strata-root-mpirun-297795585");
  // Several hosts: only the user can say where.
  Vars two_hosts = with(kMpirun, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_NE(refusal(two_hosts, false).find("STRATA_ROOT_FILE"), std::string::npos);
  Launch shared = found(with(two_hosts, {{"STRATA_ROOT_FILE", "/shared/job.id"}}), false);
  EXPECT_EQ(shared.rendezvous, Rendezvous::file);
  EXPECT_EQ(shared.root, "/shared/job.id");
}

TEST(LaunchEnv, MpirunPartialOrMalformed) {
  EXPECT_NE(refusal(with(kMpirun, {{"OMPI_COMM_WORLD_SIZE", ""}}), true).find("OMPI_COMM_WORLD_SIZE must be set"),
            std::string::npos);
  EXPECT_NE(refusal(with(kMpirun, {{"OMPI_COMM_WORLD_RANK", "4"}}), true).find("OMPI_COMM_WORLD_RANK=4 "),
            std::string::npos);
  EXPECT_NE(refusal(with(kMpirun, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}}), true).find("OMPI_COMM_WORLD_LOCAL_SIZE"),
            std::string::npos);
  EXPECT_NE(refusal(with(kMpirun, {{"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}}), true).find("OMPI_COMM_WORLD_LOCAL_RANK"),
            std::string::npos);
  EXPECT_NE(refusal(with(kMpirun, {{"OMPI_COMM_WORLD_SIZE", "4x"}}), true).find("OMPI_COMM_WORLD_SIZE=4x "),
            std::string::npos);
}

TEST(LaunchEnv, Slurm) {
  Launch l = found(kSrun, false);
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.size, 8);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 4);
  EXPECT_EQ(l.job_id, "1234.3");
  EXPECT_EQ(l.rendezvous, Rendezvous::address);
  EXPECT_TRUE(l.derived);
  // The step's first node; the port 12000 + (job * 64 + step) % 20000.
  EXPECT_EQ(l.root, "gpu07:" + std::to_string(12000 + (1234 * 64 + 3) % 20000));
  EXPECT_EQ(found(with(kSrun, {{"SLURM_STEP_ID", "4"}})).root, "gpu07:" + std::to_string(12000 + (1234 * 64 + 4) % 20000));
  EXPECT_EQ(found(with(kSrun, {{"STRATA_ROOT_PORT", "23456"}})).root, "gpu07:23456");
  // Uneven tasks per node: this node (index 1) has one.
  Launch uneven = found(with(kSrun, {{"SLURM_STEP_TASKS_PER_NODE", "3,1"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(uneven.local_size, 1);
  // srun --mpi=pmix: PMIx when built with it.
  EXPECT_EQ(found(with(kSrun, {{"PMIX_RANK", "5"}, {"PMIX_NAMESPACE", "slurm.pmix.1234.3"}}), true).rendezvous,
            Rendezvous::pmix);
}

TEST(LaunchEnv, SlurmPartialOrMalformed) {
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_NODEID", ""}})).find("SLURM_NODEID"), std::string::npos);
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_NODEID", "2"}})).find("SLURM_NODEID"), std::string::npos);
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_JOB_ID", ""}})).find("SLURM_JOB_ID"), std::string::npos);
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_STEP_NUM_TASKS", ""}, {"SLURM_NTASKS", ""}})).find("SLURM_NTASKS"),
            std::string::npos);
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_STEP_NODELIST", "gpu[07"}})).find("host list"), std::string::npos);
  EXPECT_NE(refusal(with(kSrun, {{"SLURM_LOCALID", "4"}})).find("SLURM_LOCALID"), std::string::npos);
}

TEST(LaunchEnv, InnermostLauncherWins) {
  // torchrun started by srun, one per node: torchrun's rank is this process's.
  Launch t = found(with(kSrun, kTorchrun));
  EXPECT_EQ(t.launcher, "torchrun");
  EXPECT_EQ(t.rank, 5);
  // mpirun inside an sbatch script: the batch step's SLURM_PROCID=0 is not this rank.
  Launch m = found(with(with(kSrun, {{"SLURM_PROCID", "0"}}), kMpirun), true);
  EXPECT_EQ(m.launcher, "mpirun");
  EXPECT_EQ(m.rank, 2);
  // strata-run inside anything.
  Launch s = found(with(kTorchrun, {{"STRATA_RANK", "0"}, {"STRATA_WORLD_SIZE", "2"}, {"STRATA_ROOT", "h:9"}}));
  EXPECT_EQ(s.launcher, "strata-run");
  EXPECT_EQ(s.size, 2);
}

TEST(LaunchEnv, PmixAlone) {
  Vars v = {{"PMIX_RANK", "3"}, {"PMIX_NAMESPACE", "prte.1"}};
  Launch l = found(v, true);
  EXPECT_EQ(l.launcher, "pmix");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 0);  // asked of PMIx at init
  EXPECT_EQ(l.rendezvous, Rendezvous::pmix);
  EXPECT_NE(refusal(v, false).find("built without PMIx"), std::string::npos);
}

TEST(LaunchEnv, FirstHost) {
  EXPECT_EQ(first_host("n1"), "n1");
  EXPECT_EQ(first_host("n[1-3]"), "n1");
  EXPECT_EQ(first_host("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(first_host("n[3,1]"), "n3");
  EXPECT_EQ(first_host("rack[2-3]-n[005-006]"), "rack2-n005");
  EXPECT_EQ(first_host("a,b[1-2]"), "a");
  EXPECT_THROW(first_host("n[1-2"), InvalidArgument);
  EXPECT_THROW(first_host("n]1["), InvalidArgument);
  EXPECT_THROW(first_host(""), InvalidArgument);
}

TEST(LaunchEnv, TasksPerNode) {
  EXPECT_EQ(expand_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("1,2,3"), (std::vector<int>{1, 2, 3}));
  for (const char* bad : {"", "2(x", "(x2)", "2x3", "2(x3", "1,,2", "1,", "2(y3)"})
    EXPECT_THROW(expand_tasks_per_node(bad), InvalidArgument) << bad;
}

// SipHash-2-4 with key 00..0f over messages 00..(n-1): the paper's published vectors.
TEST(DerivedSecret, SipHashVectors) {
  uint8_t key[16], msg[16];
  for (int i = 0; i < 16; ++i) key[i] = msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
}

TEST(DerivedSecret, DependsOnKeyAndJob) {
  Secret zero{}, key{};
  key.bytes[0] = 1;
  auto same = [](const Secret& a, const Secret& b) { return std::equal(a.bytes, a.bytes + 16, b.bytes); };
  EXPECT_TRUE(same(derive_secret(key, "1234.3"), derive_secret(key, "1234.3")));
  EXPECT_FALSE(same(derive_secret(key, "1234.3"), derive_secret(key, "1234.4")));
  EXPECT_FALSE(same(derive_secret(key, "1234.3"), derive_secret(zero, "1234.3")));
  EXPECT_FALSE(same(derive_secret(key, "1234.3"), key));
}

class RootFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strata-root-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/id";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static UniqueId numbered(uint8_t n) {
    UniqueId id;
    for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(n + i);
    return id;
  }
  std::string dir_, path_;
};

TEST_F(RootFile, EveryRankGetsRankZerosId) {
  // A file left by another job must not be taken for this one's.
  std::ofstream(path_) << "strata-root-1\nold-job\nok " << std::string(256, '0') << "\n";
  std::vector<UniqueId> got(3);
  std::vector<std::thread> ranks;
  for (int r = 2; r >= 0; --r)
    ranks.emplace_back([&, r] {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      got[r] = share_id_by_file(path_, "job-7", r, [] { return numbered(7); }, net::deadline_after(10));
    });
  for (auto& t : ranks) t.join();
  for (const UniqueId& id : got) EXPECT_EQ(id.bytes, numbered(7).bytes);
}

TEST_F(RootFile, RankZerosFailureReachesEveryRank) {
  std::thread zero([&] {
    EXPECT_THROW(share_id_by_file(path_, "j", 0, []() -> UniqueId { throw SystemError("no interface"); },
                                  net::deadline_after(10)),
                 SystemError);  // its own error
  });
  try {
    share_id_by_file(path_, "j", 1, nullptr, net::deadline_after(10));
    ADD_FAILURE() << "rank 1 got an id";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 0);
    EXPECT_NE(std::string(e.what()).find("no interface"), std::string::npos) << e.what();
  }
  zero.join();
}

// The id carries the job's secret, so the file must not be readable by other users
// whatever the umask.
TEST_F(RootFile, OnlyItsOwnerCanReadIt) {
  mode_t old = umask(0);
  share_id_by_file(path_, "j", 0, [] { return numbered(3); }, net::deadline_after(10));
  umask(old);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
}

TEST_F(RootFile, NoWriterTimesOut) {
  auto start = net::Clock::now();
  EXPECT_THROW(share_id_by_file(path_, "j", 1, nullptr, net::deadline_after(0.3)), TimeoutError);
  EXPECT_LT(net::Clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace strata::bootstrap
