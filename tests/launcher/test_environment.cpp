// What each rank finds in its environment and process setup.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "launcher_process.hpp"

namespace launcher_test {
namespace {

struct RankEnv {
  int prefix_rank;
  std::string rank, world_size, local_rank, local_size, root, secret;
};

// Each rank prints one line "env RANK WORLD LOCAL_RANK LOCAL_SIZE ROOT SECRET".
const char* const kPrintEnv =
    "echo \"env $STRATA_RANK $STRATA_WORLD_SIZE $STRATA_LOCAL_RANK $STRATA_LOCAL_SIZE "
    "$STRATA_ROOT $STRATA_SECRET\"";

std::vector<RankEnv> parse_env_lines(const std::string& out) {
  static const std::regex line_re(R"(^\[(\d+)\] env (\S+) (\S+) (\S+) (\S+) (\S+) (\S+)$)");
  std::vector<RankEnv> result;
  for (const auto& line : split_lines(out)) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, line_re)) << "unexpected line: " << line;
    if (m.empty()) continue;
    result.push_back({std::stoi(m[1]), m[2], m[3], m[4], m[5], m[6], m[7]});
  }
  return result;
}

const std::regex kSecretRe("^[0-9a-f]{32}$");
const std::regex kRootRe(R"(^127\.0\.0\.1:(\d+)$)");

TEST(Environment, EveryRankGetsItsOwnRankAndTheSameJob) {
  constexpr int kRanks = 4;
  ProcResult r = run_launcher({"-n", std::to_string(kRanks), "/bin/sh", "-c", kPrintEnv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<RankEnv> envs = parse_env_lines(r.out);
  ASSERT_EQ(envs.size(), size_t{kRanks}) << r.out;

  std::set<int> ranks;
  for (const auto& e : envs) {
    int rank = std::stoi(e.rank);
    EXPECT_EQ(rank, e.prefix_rank) << "the prefix names the rank that printed the line";
    ranks.insert(rank);
    EXPECT_EQ(e.world_size, "4");
    EXPECT_EQ(e.local_rank, e.rank);
    EXPECT_EQ(e.local_size, "4");
    EXPECT_EQ(e.root, envs[0].root);
    EXPECT_EQ(e.secret, envs[0].secret);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));

  EXPECT_TRUE(std::regex_match(envs[0].secret, kSecretRe)) << envs[0].secret;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(envs[0].root, m, kRootRe)) << envs[0].root;
  int port = std::stoi(m[1]);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);

  // The port was free for rank 0 to listen on; with the job gone it should be free again.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
}

TEST(Environment, FreshValuesReplaceInheritedOnesAndTheRestPassesThrough) {
  std::string script = std::string(kPrintEnv) +
                       "; echo \"mine $MY_VAR\"; "
                       "echo \"count $(env | grep -c -e '^STRATA_ROOT=' -e '^STRATA_RANK=')\"";
  ProcResult r = run_launcher(
      {"-n", "2", "/bin/sh", "-c", script},
      {"STRATA_ROOT=10.1.2.3:999", "STRATA_SECRET=00112233445566778899aabbccddeeff",
       "STRATA_RANK=7", "STRATA_WORLD_SIZE=9", "STRATA_LOCAL_RANK=7", "STRATA_LOCAL_SIZE=9",
       "MY_VAR=kept as is"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::string env_lines, other_lines;
  for (const auto& line : split_lines(r.out))
    (line.find("] env ") != std::string::npos ? env_lines : other_lines) += line + "\n";
  std::vector<RankEnv> envs = parse_env_lines(env_lines);
  ASSERT_EQ(envs.size(), 2u);
  for (const auto& e : envs) {
    EXPECT_EQ(e.rank, std::to_string(e.prefix_rank));
    EXPECT_EQ(e.world_size, "2");
    EXPECT_EQ(e.local_rank, e.rank);
    EXPECT_EQ(e.local_size, "2");
    EXPECT_TRUE(std::regex_match(e.root, kRootRe)) << e.root;
    EXPECT_TRUE(std::regex_match(e.secret, kSecretRe)) << e.secret;
    EXPECT_NE(e.secret, "00112233445566778899aabbccddeeff");
  }
  for (int rank : {0, 1}) {
    std::string p = "[" + std::to_string(rank) + "] ";
    EXPECT_TRUE(contains(other_lines, p + "mine kept as is\n"));
    EXPECT_TRUE(contains(other_lines, p + "count 2\n")) << "each variable set exactly once";
  }
}

TEST(Environment, EachJobGetsANewSecret) {
  ProcResult a = run_launcher({"-n", "1", "/bin/sh", "-c", kPrintEnv});
  ProcResult b = run_launcher({"-n", "1", "/bin/sh", "-c", kPrintEnv});
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  auto ea = parse_env_lines(a.out), eb = parse_env_lines(b.out);
  ASSERT_EQ(ea.size(), 1u);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_NE(ea[0].secret, eb[0].secret);
}

TEST(Environment, StdinIsDevNull) {
  // strata-run's own stdin is a pipe that stays open: a rank reading it would hang.
  ProcResult r = run_launcher(
      {"-n", "2", "/bin/sh", "-c", "cat; echo \"stdin $(readlink /proc/self/fd/0)\""});
  ASSERT_FALSE(r.killed_by_deadline);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[0] stdin /dev/null\n"));
  EXPECT_TRUE(contains(r.out, "[1] stdin /dev/null\n"));
}

TEST(Environment, EachRankLeadsItsOwnProcessGroup) {
  // Field 5 of /proc/PID/stat is the process group (comm "sh" has no spaces).
  ProcResult r = run_launcher(
      {"-n", "3", "/bin/sh", "-c", "echo \"$$ $(cut -d' ' -f5 /proc/$$/stat)\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> groups;
  for (const auto& line : split_lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, std::regex(R"(^\[\d\] (\d+) (\d+)$)"))) << line;
    EXPECT_EQ(m[1], m[2]) << "the rank is its group's leader";
    groups.insert(m[2]);
  }
  EXPECT_EQ(groups.size(), 3u);
  EXPECT_FALSE(groups.contains(std::to_string(getpgrp())));
}

}  // namespace
}  // namespace launcher_test
