#include "launcher_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <thread>

extern char** environ;

namespace launcher_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int LaunchResult::exit_code() const {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

Launch::Launch(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv_s{STRATA_RUN_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  // Inherited variables that extra_env sets are left out: getenv would see the first.
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::set<std::string> overridden;
  for (const auto& x : extra_env) overridden.insert(name_of(x));
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e)
    if (!overridden.contains(name_of(*e))) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  started_ = std::chrono::steady_clock::now();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(126);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  if (pid_ < 0) throw std::runtime_error("fork failed");
}

Launch::~Launch() {
  if (!finished_) finish(1s);
}

LaunchResult Launch::finish(std::chrono::seconds timeout) {
  LaunchResult r;
  finished_ = true;
  auto deadline = started_ + timeout;
  std::string* sinks[2] = {&r.out, &r.err};
  int fds[2] = {stdout_fd_, stderr_fd_};
  bool exited = false;
  // Read until both pipes close and strata-run has exited; poll in short steps so that
  // the exit is noticed even if some stray process keeps a pipe open.
  while (!exited || fds[0] >= 0 || fds[1] >= 0) {
    if (!exited) {
      pid_t w = waitpid(pid_, &r.wait_status, WNOHANG);
      if (w == pid_) {
        exited = true;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_)
                        .count();
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (!exited) {
        r.timed_out = true;
        kill(pid_, SIGKILL);
        waitpid(pid_, &r.wait_status, 0);
        exited = true;
      }
      break;
    }
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      p[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    if (n == 0) {
      std::this_thread::sleep_for(5ms);
      continue;
    }
    if (poll(p, n, 20) <= 0) continue;
    for (nfds_t k = 0; k < n; ++k) {
      if (p[k].revents == 0) continue;
      char buf[65536];
      ssize_t got = read(p[k].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[which[k]]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[which[k]]);
        fds[which[k]] = -1;
      }
    }
  }
  for (int fd : {fds[0], fds[1], stdin_fd_})
    if (fd >= 0) close(fd);
  return r;
}

LaunchResult run_launcher(const std::vector<std::string>& args,
                          const std::vector<std::string>& extra_env) {
  return Launch(args, extra_env).finish();
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
