// The tests' process runner on /bin/sh commands: what it captures, its deadline, and what
// it cleans up after a process.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <string>

#include "tests/common/process.hpp"

namespace strata_test {
namespace {

SpawnSpec sh(const std::string& script, bool merge_stderr = false) {
  SpawnSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = make_env({});
  s.merge_stderr = merge_stderr;
  return s;
}

TEST(Process, CapturesOutputAndExitCode) {
  ProcResult r = Process(sh("echo out; echo err >&2; exit 3")).finish(10);
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.killed_by_deadline);
}

TEST(Process, MergesStderrWhenAsked) {
  ProcResult r = Process(sh("echo a; echo b >&2; echo c", true)).finish(10);
  EXPECT_EQ(r.out, "a\nb\nc\n");
  EXPECT_EQ(r.err, "");
}

TEST(Process, ReportsASignal) {
  ProcResult r = Process(sh("kill -TERM $$")).finish(10);
  EXPECT_FALSE(r.exited);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.term_signal, SIGTERM);
}

TEST(Process, KillsAtTheDeadline) {
  ProcResult r = Process(sh("echo started; exec sleep 30")).finish(0.5);
  EXPECT_TRUE(r.killed_by_deadline);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_LT(r.elapsed_s, 5);
  EXPECT_EQ(r.out, "started\n");
}

// A child left in the process group (here one holding the output pipe) goes with it.
TEST(Process, OwnGroupTakesLeftoversAlong) {
  double t0 = now_s();
  auto rs = run_all({sh("sleep 30 & echo done"), sh("exit 1")}, 20);
  EXPECT_LT(now_s() - t0, 5) << "waited for the leftover sleep";
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].exit_code, 0);
  EXPECT_EQ(rs[0].out, "done\n");
  EXPECT_EQ(rs[1].exit_code, 1);
}

// Without a group of its own the leftover is not killed, and its open pipe is waited for
// until the deadline.
TEST(Process, WithoutOwnGroupLeftoversAreLeftAlone) {
  SpawnSpec s = sh("sleep 1 & echo done");
  s.own_group = false;
  double t0 = now_s();
  ProcResult r = Process(s).finish(20);
  EXPECT_GE(now_s() - t0, 0.9) << "did not wait for the leftover holding the pipe";
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LT(r.elapsed_s, 0.9) << "the process itself ended at once";
}

TEST(Process, StdinIsAnOpenPipeOrEmpty) {
  SpawnSpec s = sh("timeout 1 cat; echo $?");
  EXPECT_EQ(Process(s).finish(10).out, "0\n") << "/dev/null: end-of-file at once";
  s.stdin_pipe = true;
  EXPECT_EQ(Process(s).finish(10).out, "124\n") << "a held pipe blocks the read until the timeout";
}

TEST(Process, EnvironmentDropsStrataSettingsButDebug) {
  setenv("STRATA_TRANSPORT", "tcp", 1);
  setenv("STRATA_DEBUG", "1", 1);
  auto env = make_env({{"STRATA_ALGO", "ring"}});
  unsetenv("STRATA_TRANSPORT");
  unsetenv("STRATA_DEBUG");
  auto has = [&](const std::string& kv) {
    for (auto& e : env)
      if (e == kv) return true;
    return false;
  };
  EXPECT_FALSE(has("STRATA_TRANSPORT=tcp"));
  EXPECT_TRUE(has("STRATA_DEBUG=1"));
  EXPECT_TRUE(has("STRATA_ALGO=ring"));
}

TEST(Process, OutputHelpers) {
  EXPECT_EQ(lines_containing("a x\nb\nc x\n", "x"), (std::vector<std::string>{"a x", "c x"}));
  EXPECT_EQ(tail("abcdef", 10), "abcdef");
  EXPECT_EQ(tail("abcdef", 2), "...[4 chars cut]...\nef");
}

}  // namespace
}  // namespace strata_test
