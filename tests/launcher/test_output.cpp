// How the ranks' output reaches strata-run's stdout and stderr.
#include <algorithm>
#include <map>
#include <regex>

#include "launcher_process.hpp"

namespace launcher_test {
namespace {

TEST(Output, StdoutAndStderrKeepTheirStreamsWithPrefixes) {
  ProcResult r = run_launcher(
      {"-n", "2", "/bin/sh", "-c", "echo \"out $STRATA_RANK\"; echo \"err $STRATA_RANK\" >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = split_lines(r.out), err = split_lines(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[0] out 0", "[1] out 1"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[0] err 0", "[1] err 1"}));
}

TEST(Output, NoPrefix) {
  ProcResult r =
      run_launcher({"--no-prefix", "-n", "1", "/bin/sh", "-c", "echo plain; echo e >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "plain\n");
  EXPECT_EQ(r.err, "e\n");
}

TEST(Output, UnterminatedLastLineIsFlushedWithANewline) {
  ProcResult r = run_launcher(
      {"-n", "1", "/bin/sh", "-c", "printf 'a\\n\\nno newline'; printf 'half' >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] a\n[0] \n[0] no newline\n");
  EXPECT_EQ(r.err, "[0] half\n");
}

// Each rank writes many long lines (longer than PIPE_BUF, so they reach strata-run in
// pieces) as fast as it can, odd ones to stderr. Every line that comes out must be one
// whole line of one rank, in that rank's order.
TEST(Output, LinesOfDifferentRanksNeverMix) {
  constexpr int kRanks = 4, kLines = 200, kWidth = 6000;
  std::string script =
      "p=$(printf '%" + std::to_string(kWidth) + "s' '' | tr ' ' \"$STRATA_RANK\"); i=0; "
      "while [ $i -lt " + std::to_string(kLines) + " ]; do "
      "  if [ $((i % 2)) = 0 ]; then echo \"r$STRATA_RANK l$i $p\"; "
      "  else echo \"r$STRATA_RANK l$i $p\" >&2; fi; i=$((i + 1)); "
      "done";
  ProcResult r = run_launcher({"-n", std::to_string(kRanks), "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);

  // Parsed by hand: std::regex recurses per character and would overflow on such lines.
  const std::regex head_re(R"(^\[(\d)\] r(\d) l(\d+) $)");
  for (int stream = 0; stream < 2; ++stream) {
    const std::string& text = stream == 0 ? r.out : r.err;
    ASSERT_EQ(text.back(), '\n');
    std::map<int, int> next_line;  // rank -> the line number expected next on this stream
    for (int rank = 0; rank < kRanks; ++rank) next_line[rank] = stream;
    for (const auto& line : split_lines(text)) {
      ASSERT_GE(line.size(), size_t{kWidth}) << "short line: " << line.substr(0, 200);
      std::string head = line.substr(0, line.size() - kWidth);
      std::smatch m;
      ASSERT_TRUE(std::regex_match(head, m, head_re)) << "mixed line: " << line.substr(0, 200);
      int rank = std::stoi(m[1]);
      ASSERT_EQ(m[2], m[1]);
      ASSERT_EQ(line.substr(head.size()), std::string(kWidth, static_cast<char>('0' + rank)));
      ASSERT_EQ(std::stoi(m[3]), next_line[rank]);
      next_line[rank] += 2;
    }
    for (int rank = 0; rank < kRanks; ++rank)
      EXPECT_EQ(next_line[rank], kLines + stream) << "rank " << rank << " lost lines";
  }
}

TEST(Output, OptionsAfterTheCommandBelongToTheCommand) {
  ProcResult r =
      run_launcher({"-n", "1", "/bin/sh", "-c", "echo \"$*\"", "sh", "--no-prefix", "-n", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] --no-prefix -n 5\n");
}

TEST(Output, DoubleDashEndsOptions) {
  ProcResult r = run_launcher({"-n", "1", "--", "/bin/sh", "-c", "echo hi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] hi\n");
}

}  // namespace
}  // namespace launcher_test
