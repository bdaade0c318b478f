// strata-train with DiLoCo (training/diloco.hpp) on two islands of two ranks: every rank
// ends on the same global model, one island reproduces plain data parallel, a resumed run
// continues the uninterrupted curve bit for bit, and mistakes are refused before training.
#include <gtest/gtest.h>

#include <dirent.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "train_proc.hpp"

using train_test::run_train;
using train_test::TrainRun;

namespace {

// The small model of test_runs.cpp (26,028 parameters), four layer groups.
std::vector<std::string> args(int steps, std::vector<std::string> more) {
  std::vector<std::string> a = {"--data", STRATA_DATA_PATH, "--layers", "2", "--heads", "3", "--dim", "27",
                                "--ctx", "32", "--batch", "8", "--steps", std::to_string(steps), "--warmup", "5",
                                "--lr", "3e-3", "--eval-every", "10", "--eval-batches", "2", "--sample-len", "0",
                                "--bucket-mb", "0.02", "--threads", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

void expect_one_checksum(const TrainRun& r, int ranks) {
  ASSERT_EQ(static_cast<int>(r.checksums.size()), ranks) << r.describe();
  for (const auto& c : r.checksums) EXPECT_EQ(c, r.checksums[0]) << "ranks disagree\n" << r.describe();
}

double loss(const TrainRun& r, int step) { return std::atof(r.loss.at(step).c_str()); }

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

}  // namespace

// Plain, compressed, streaming and ZeRO inside the islands: training progresses, and at
// the end all four ranks hold the global model bit for bit.
TEST(Diloco, EveryRankEndsOnTheGlobalModel) {
  const std::vector<std::vector<std::string>> modes = {
      {"--diloco-h", "5", "--islands", "2"},
      {"--diloco-h", "5", "--islands", "2", "--outer-dtype", "int8", "--fragments", "2", "--overlap", "1"},
      {"--diloco-h", "4", "--islands", "2", "--outer-dtype", "fp4", "--fragments", "4", "--overlap", "2", "--mix",
       "0.5", "--zero", "2"},
  };
  for (const auto& m : modes) {
    TrainRun r = run_train(4, args(20, m));
    ASSERT_TRUE(r.ok()) << r.describe();
    ASSERT_EQ(r.loss.size(), 20u) << r.describe();
    expect_one_checksum(r, 4);
    EXPECT_LT(std::atof(r.val_loss.at(20).c_str()), 0.85 * std::log(256.0)) << r.describe();
    ASSERT_EQ(r.outer.size(), 1u) << r.describe();
    EXPECT_EQ(r.outer[0].find("0.00 MB sent"), std::string::npos) << r.outer[0];
    std::cout << r.command.substr(r.command.find("--diloco-h")) << "\n  val loss at 20 " << r.val_loss.at(20)
              << "; " << r.outer[0] << "\n";
  }
}

// One island of four ranks, H = 1, outer lr 1, momentum 0: θ_old − 1·(θ_old − θ) is θ up
// to rounding, so the run follows plain data parallel (same slices of the same batches).
TEST(Diloco, OneIslandWithIdentityOuterStepIsDataParallel) {
  TrainRun plain = run_train(4, args(20, {}));
  TrainRun diloco =
      run_train(4, args(20, {"--diloco-h", "1", "--islands", "1", "--outer-lr", "1", "--outer-momentum", "0"}));
  ASSERT_TRUE(plain.ok()) << plain.describe();
  ASSERT_TRUE(diloco.ok()) << diloco.describe();
  double worst = 0;
  for (int s = 1; s <= 20; ++s) {
    const double d = std::fabs(loss(diloco, s) - loss(plain, s)) / loss(plain, s);
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-4) << "step " << s << ": " << diloco.loss.at(s) << " vs " << plain.loss.at(s);
  }
  std::cout << "one island, identity outer step vs data parallel: 20 losses, worst relative " << worst << "\n";
}

// Stopped at step 12, between outer steps and with fragment 0's exchange (started at 12)
// still to be applied at 13; resumed to 20: the same losses, validation and final
// parameters as the run that never stopped.
TEST(Diloco, ResumeContinuesTheSameCurve) {
  const std::vector<std::string> mode = {"--diloco-h", "5", "--islands", "2", "--outer-dtype", "fp4",
                                         "--fragments", "2", "--overlap", "1", "--zero", "1"};
  std::string dir = train_test::make_temp_dir("diloco");
  ASSERT_FALSE(dir.empty());
  TrainRun full = run_train(4, args(20, mode));
  ASSERT_TRUE(full.ok()) << full.describe();
  std::vector<std::string> stop = mode;
  stop.insert(stop.end(), {"--stop-at", "12", "--save", dir});
  TrainRun first = run_train(4, args(20, stop));
  ASSERT_TRUE(first.ok()) << first.describe();
  EXPECT_EQ(entries(dir), (std::set<std::string>{"island-0", "island-1", "outer.bin"}));
  for (const char* island : {"/island-0", "/island-1"}) {
    auto files = train_test::snapshot(dir + island);
    EXPECT_TRUE(files.size() == 1u && files.count("checkpoint.bin")) << island;
  }
  std::vector<std::string> resume = mode;
  resume.insert(resume.end(), {"--resume", dir});
  TrainRun second = run_train(4, args(20, resume));
  ASSERT_TRUE(second.ok()) << second.describe();
  train_test::expect_resumed_bitwise(first, second, full, 12);
  expect_one_checksum(second, 4);
  EXPECT_EQ(second.checksums[0], full.checksums[0]) << "final parameters differ from the uninterrupted run";
  std::cout << "DiLoCo fp4 F=2 tau=1 zero 1: stopped at 12, resumed to 20; losses and parameters bitwise equal "
            << "(step 20 loss " << second.loss.at(20) << ", checksum " << second.checksums[0] << ")\n";

  // The directory cannot be resumed without DiLoCo, nor a plain one with it.
  TrainRun plain = run_train(4, args(20, {"--resume", dir}));
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.proc.out.find("holds a DiLoCo checkpoint"), std::string::npos) << plain.describe();
  train_test::remove_tree(dir);
}

// Mistakes that only the job can see: islands that split a group of the hierarchy's
// outermost level (here emulated nodes of 3 ranks), a damaged outer state.
TEST(Diloco, JobLevelMistakesAreRefused) {
  TrainRun split = run_train(4, args(4, {"--diloco-h", "2", "--islands", "2"}), 60, {{"STRATA_HIERARCHY", "node:3"}});
  EXPECT_FALSE(split.ok());
  EXPECT_NE(split.proc.out.find("split a group of the hierarchy's outermost level"), std::string::npos)
      << split.describe();
  EXPECT_TRUE(split.loss.empty());

  std::string dir = train_test::make_temp_dir("diloco-bad");
  const std::vector<std::string> mode = {"--diloco-h", "2", "--islands", "2"};
  std::vector<std::string> save = mode;
  save.insert(save.end(), {"--stop-at", "3", "--save", dir});
  ASSERT_TRUE(run_train(4, args(6, save)).ok());
  std::string outer = train_test::read_file(dir + "/outer.bin");
  outer[200] ^= 1;
  train_test::write_file(dir + "/outer.bin", outer);
  std::vector<std::string> resume = mode;
  resume.insert(resume.end(), {"--resume", dir});
  TrainRun r = run_train(4, args(6, resume));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.proc.out.find("outer.bin' is not usable: payload checksum mismatch"), std::string::npos) << r.describe();
  EXPECT_TRUE(r.loss.empty());
  train_test::remove_tree(dir);
}
