// Command-line handling: usage errors exit 2 with a message and the usage text.
#include "launcher_process.hpp"

namespace launcher_test {
namespace {

struct BadUsage {
  std::vector<std::string> args;
  std::string message;
};

// Readable test names in ctest (the default would print the struct's bytes).
void PrintTo(const BadUsage& u, std::ostream* os) {
  *os << "strata-run";
  for (const auto& a : u.args) *os << " " << a;
}

class UsageError : public ::testing::TestWithParam<BadUsage> {};

TEST_P(UsageError, ExitsWithStatus2AndExplains) {
  ProcResult r = run_launcher(GetParam().args);
  EXPECT_EQ(r.exit_code, 2);
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
        BadUsage{{"--hosts", "a,b", "-n", "2", "true"}, "--hosts needs a whole number"},
        BadUsage{{"--hosts", "0", "-n", "2", "true"}, "got '0'"},
        BadUsage{{"--hosts=-1", "-n", "2", "true"}, "got '-1'"},
        BadUsage{{"--hosts", "3", "-n", "2", "true"}, "--hosts 3 is more than the 2 rank(s)"},
        BadUsage{{"--link-rate=1g", "--hosts", "2", "-n", "2", "true"},
                 "--link-rate needs a rate in tc's syntax"},
        BadUsage{{"--link-rate", "fast", "--hosts", "2", "-n", "2", "true"}, "got 'fast'"},
        BadUsage{{"--link-rate", "0mbit", "--hosts", "2", "-n", "2", "true"}, "got '0mbit'"},
        BadUsage{{"--link-rate", "-1mbit", "--hosts", "2", "-n", "2", "true"}, "got '-1mbit'"},
        BadUsage{{"--link-rate", "1e3mbit", "--hosts", "2", "-n", "2", "true"}, "got '1e3mbit'"},
        BadUsage{{"--link-rate", "1tbit", "--hosts", "2", "-n", "2", "true"}, "got '1tbit'"},
        BadUsage{{"--link-rate", "1gbit", "-n", "2", "true"}, "--link-rate needs --hosts"},
        BadUsage{{"--subnet", "10.9.0.0/24", "-n", "2", "true"}, "--subnet needs --hosts"},
        BadUsage{{"--subnet", "10.9.0.1/24", "--hosts", "2", "-n", "2", "true"},
                 "got '10.9.0.1/24'"},
        BadUsage{{"--subnet", "10.9.0.0/31", "--hosts", "2", "-n", "2", "true"},
                 "got '10.9.0.0/31'"},
        BadUsage{{"--subnet", "10.9.0/24", "--hosts", "2", "-n", "2", "true"}, "got '10.9.0/24'"},
        BadUsage{{"--subnet", "10.9.0.0/30", "--hosts", "3", "-n", "3", "true"},
                 "has room for 2 hosts, not 3"},
        BadUsage{{"--grace", "-1", "-n", "2", "true"}, "--grace needs"},
        BadUsage{{"--grace", "soon", "-n", "2", "true"}, "--grace needs"},
        BadUsage{{"--no-prefix=yes", "-n", "2", "true"}, "takes no value"},
        // The exact words, and the first problem on the line wins.
        BadUsage{{"--nranks"}, "option '--nranks' needs a value (N)"},
        BadUsage{{"-n", "2", "--grace"}, "option '--grace' needs a value (SEC)"},
        BadUsage{{"--no-prefix=", "-n", "2", "true"}, "option '--no-prefix' takes no value"},
        BadUsage{{"-hx", "-n", "2", "true"}, "unknown option '-hx'"},
        BadUsage{{"-xyz", "-n", "2", "true"}, "unknown option '-x'"},
        BadUsage{{"--bogus=1", "-n", "2", "true"}, "unknown option '--bogus'"},
        BadUsage{{"-1", "-n", "2", "true"}, "unknown option '-1'"},
        BadUsage{{"--bogus", "-n", "0", "true"}, "unknown option '--bogus'"},
        BadUsage{{"-n", "0", "--bogus", "true"}, "-n needs a whole number of ranks >= 1, got '0'"},
        BadUsage{{"-h", "--bogus"}, "unknown option '--bogus'"},
        BadUsage{{"-n", "1", "-n", "0", "true"}, "got '0'"}));

TEST(Usage, HelpGoesToStdoutAndSucceeds) {
  for (const char* flag : {"-h", "--help"}) {
    ProcResult r = run_launcher({flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
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
    ProcResult r = run_launcher(full);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(split_lines(r.out).size(), 2u) << args[0];
    EXPECT_TRUE(contains(r.out, "] 2\n")) << args[0];
  }
}

TEST(Usage, EverythingFromTheCommandOnIsItsOwn) {
  // Options end at the first argument that is not one, or at "--"; what follows is the
  // command's argv, untouched (its own "--" and options included).
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-n", "1", "--no-prefix", "/bin/echo", "--grace", "-n", "5", "--", "-h"},
           {"-n", "1", "--no-prefix", "--", "/bin/echo", "--grace", "-n", "5", "--", "-h"}}) {
    ProcResult r = run_launcher(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "--grace -n 5 -- -h\n");
  }
  ProcResult r = run_launcher({"-n", "1", "--no-prefix", "--", "--", "x"});
  EXPECT_EQ(r.exit_code, 127);  // the command is "--"
}

}  // namespace
}  // namespace launcher_test
