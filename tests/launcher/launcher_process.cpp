#include "launcher_process.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

namespace launcher_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

Process start_launcher(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  strata_test::SpawnSpec spec;
  spec.argv = {STRATA_RUN_PATH};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> overrides;
  for (const auto& x : extra_env) {
    auto eq = x.find('=');
    overrides[x.substr(0, eq)] = eq == std::string::npos ? "" : x.substr(eq + 1);
  }
  spec.env = strata_test::make_env(overrides);
  spec.own_group = false;
  spec.stdin_pipe = true;
  return Process(spec);
}

ProcResult run_launcher(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  return start_launcher(args, extra_env).finish(kLaunchDeadline);
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "strata-launcher-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

const char* const kRecordFn =
    "record() { echo \"$2\" > \"$TESTDIR/.tmp.$1.$STRATA_RANK\" && "
    "mv \"$TESTDIR/.tmp.$1.$STRATA_RANK\" \"$TESTDIR/$1.$STRATA_RANK\"; }; "
    "await_ranks() { while [ \"$(ls \"$TESTDIR\" | grep -c '^rank[.]')\" -lt \"$1\" ]; do "
    "sleep 0.02; done; }; ";

std::set<pid_t> recorded_pids(const fs::path& dir) {
  std::set<pid_t> pids;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with(".tmp")) continue;
    std::ifstream in(entry.path());
    pid_t pid = 0;
    if (in >> pid && pid > 0) pids.insert(pid);
  }
  return pids;
}

bool wait_for_recorded(const fs::path& dir, size_t count, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (recorded_pids(dir).size() < count) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (comm) S ...": the state follows the last ')', as comm may contain spaces.
  auto close_paren = line.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= line.size() ||
         line[close_paren + 2] != 'Z';
}

std::set<pid_t> survivors(const std::set<pid_t>& pids, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::set<pid_t> alive;
    for (pid_t p : pids)
      if (process_alive(p)) alive.insert(p);
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) {
      for (pid_t p : alive) kill(p, SIGKILL);  // do not leak them into later tests
      return alive;
    }
    std::this_thread::sleep_for(10ms);
  }
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));  // unterminated: the caller can tell by comparing
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not found in:\n" << haystack;
}

}  // namespace launcher_test
