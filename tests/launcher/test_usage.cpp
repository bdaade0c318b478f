// Command-line handling: usage errors exit 2 with a message and the usage text.
#include "launcher_process.hpp"

namespace launcher_test {
namespace {

struct BadUsage {
  std::vector<std::string> args;
  std::string message;
};

class UsageError : public ::testing::TestWithParam<BadUsage> {};

TEST_P(UsageError, ExitsWithStatus2AndExplains) {
  LaunchResult r = run_launcher(GetParam().args);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_TRUE(contains(r.err, GetParam().message));
  EXPECT_TRUE(contains(r.err, "usage: strata-run -n N"));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Launcher, UsageError,
    ::testing::Values(
        BadUsage{{}, "missing -n"},
        BadUsage{{"true"}, "missing -n"},
        BadUsage{{"-n"}, "option '-n' needs a value"},
        BadUsage{{"-n", "0", "true"}, "got '0'"},
        BadUsage{{"-n", "-2", "true"}, "got '-2'"},
        BadUsage{{"-n", "two", "true"}, "got 'two'"},
        BadUsage{{"-n", "2x", "true"}, "got '2x'"},
        BadUsage{{"-n", "2"}, "missing the command"},
        BadUsage{{"-n", "2", "--"}, "missing the command"},
        BadUsage{{"--bogus", "-n", "2", "true"}, "unknown option '--bogus'"},
        BadUsage{{"-x", "-n", "2", "true"}, "unknown option '-x'"},
        BadUsage{{"--hosts", "a,b", "-n", "2", "true"}, "unknown option '--hosts'"},
        BadUsage{{"--link-rate=1g", "-n", "2", "true"}, "unknown option '--link-rate'"},
        BadUsage{{"--grace", "-1", "-n", "2", "true"}, "--grace needs"},
        BadUsage{{"--grace", "soon", "-n", "2", "true"}, "--grace needs"},
        BadUsage{{"--no-prefix=yes", "-n", "2", "true"}, "takes no value"}));

TEST(Usage, HelpGoesToStdoutAndSucceeds) {
  for (const char* flag : {"-h", "--help"}) {
    LaunchResult r = run_launcher({flag});
    EXPECT_EQ(r.exit_code(), 0) << flag;
    EXPECT_TRUE(contains(r.out, "usage: strata-run -n N"));
    EXPECT_TRUE(contains(r.out, "exit status:"));
    EXPECT_EQ(r.err, "");
  }
}

TEST(Usage, SpellingsOfOptionsWithValues) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-n2"}, {"-n", "2"}, {"--nranks=2"}, {"--nranks", "2"},
           {"--grace=0.25", "-n", "2"}, {"--grace", "0", "-n", "2"}}) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"/bin/sh", "-c", "echo $STRATA_WORLD_SIZE"});
    LaunchResult r = run_launcher(full);
    EXPECT_EQ(r.exit_code(), 0) << args[0] << ": " << r.err;
    EXPECT_EQ(split_lines(r.out).size(), 2u) << args[0];
    EXPECT_TRUE(contains(r.out, "] 2\n")) << args[0];
  }
}

}  // namespace
}  // namespace launcher_test
