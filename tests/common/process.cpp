#include "tests/common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace strata_test {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::vector<std::string> make_env(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    if (kv.rfind("STRATA_", 0) == 0 && kv.rfind("STRATA_DEBUG", 0) != 0) continue;
    std::string key = kv.substr(0, kv.find('='));
    if (overrides.count(key)) continue;  // getenv would see the first
    env.push_back(kv);
  }
  for (auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

std::string ProcResult::describe() const {
  std::ostringstream o;
  if (killed_by_deadline) o << "killed at deadline, ";
  if (exited)
    o << "exit code " << exit_code;
  else if (term_signal)
    o << "signal " << term_signal << " (" << strsignal(term_signal) << ")";
  else
    o << "status " << status;
  o << " after " << elapsed_s << " s";
  return o.str();
}

namespace detail {

struct Child {
  pid_t pid = -1;
  bool own_group = true;
  int stdin_fd = -1;
  int fd[2] = {-1, -1};  // stdout, stderr (-1: closed, or merged into stdout)
  double started = 0;
  bool reaped = false, collected = false;
  ProcResult res;

  explicit Child(const SpawnSpec& spec) : own_group(spec.own_group) {
    int in[2] = {-1, -1}, out[2], err[2];
    if ((spec.stdin_pipe && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0 ||
        (!spec.merge_stderr && pipe2(err, O_CLOEXEC) != 0))
      throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
    std::vector<char*> argv, envp;
    for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    started = now_s();
    pid = fork();
    if (pid == 0) {
      if (own_group) setpgid(0, 0);
      int in_fd = spec.stdin_pipe ? in[0] : open("/dev/null", O_RDONLY);
      if (in_fd >= 0) dup2(in_fd, 0);
      dup2(out[1], 1);
      dup2(spec.merge_stderr ? out[1] : err[1], 2);
      execve(argv[0], argv.data(), envp.data());
      dprintf(2, "execve %s: %s\n", argv[0], strerror(errno));
      _exit(127);
    }
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
    if (own_group) setpgid(pid, pid);  // also here, so the group exists before we might kill it
    if (spec.stdin_pipe) {
      close(in[0]);
      stdin_fd = in[1];
    }
    close(out[1]);
    fd[0] = out[0];
    if (!spec.merge_stderr) {
      close(err[1]);
      fd[1] = err[0];
    }
  }

  bool done() const { return reaped && fd[0] < 0 && fd[1] < 0; }

  void record(int st) {
    reaped = true;
    res.status = st;
    res.elapsed_s = now_s() - started;
    res.exited = WIFEXITED(st);
    if (WIFEXITED(st)) res.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) res.term_signal = WTERMSIG(st);
    // Anything it left running in its group (ranks of a launcher) goes too.
    if (own_group) kill(-pid, SIGKILL);
  }
  void try_reap() {
    int st;
    if (!reaped && waitpid(pid, &st, WNOHANG) == pid) record(st);
  }
  void kill_and_reap() {
    if (reaped) return;
    if (own_group) kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    record(st);
  }
  // One read from stream k: > 0 bytes appended, 0 at end-of-file, < 0 on an error.
  ssize_t read_once(int k) {
    char buf[65536];
    ssize_t r = read(fd[k], buf, sizeof buf);
    if (r > 0) (k == 0 ? res.out : res.err).append(buf, static_cast<size_t>(r));
    return r;
  }
  void close_stream(int k) {
    close(fd[k]);
    fd[k] = -1;
  }
  void read_from(int k) {
    ssize_t r = read_once(k);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) close_stream(k);
  }
  // What is left in the pipes, without waiting for writers that may never close them.
  void drain() {
    for (int k = 0; k < 2; ++k) {
      if (fd[k] < 0) continue;
      fcntl(fd[k], F_SETFL, O_NONBLOCK);
      while (read_once(k) > 0) {
      }
      close_stream(k);
    }
  }
  ProcResult take() {
    collected = true;
    if (stdin_fd >= 0) close(stdin_fd);
    stdin_fd = -1;
    return std::move(res);
  }
  ~Child() {
    if (!collected && pid > 0) kill_and_reap();
    for (int f : {fd[0], fd[1], stdin_fd})
      if (f >= 0) close(f);
  }
};

// Polls every child's output and exit until each has exited and closed its output, or
// until `deadline_s` after its spawn (then a running child is killed).
static void collect(const std::vector<Child*>& cs, double deadline_s) {
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<Child*, int>> who;
    for (Child* c : cs)
      for (int k = 0; k < 2; ++k)
        if (c->fd[k] >= 0) {
          pfds.push_back({c->fd[k], POLLIN, 0});
          who.push_back({c, k});
        }
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 20);
    else usleep(5000);
    for (size_t i = 0; i < pfds.size(); ++i)
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) who[i].first->read_from(who[i].second);
    bool all_done = true;
    for (Child* c : cs) {
      c->try_reap();
      if (c->done()) continue;
      if (now_s() - c->started > deadline_s) {
        if (!c->reaped) {
          c->res.killed_by_deadline = true;
          c->kill_and_reap();
        }
        c->drain();
      } else {
        all_done = false;
      }
    }
    if (all_done) return;
  }
}

}  // namespace detail

Process::Process(const SpawnSpec& spec) : child_(std::make_unique<detail::Child>(spec)) {}
Process::~Process() = default;
Process::Process(Process&&) noexcept = default;

pid_t Process::pid() const { return child_->pid; }

bool Process::wait_for_output(const std::string& needle, double timeout_s) {
  detail::Child& c = *child_;
  const double until = now_s() + timeout_s;
  for (;;) {
    if (c.res.out.find(needle) != std::string::npos || c.res.err.find(needle) != std::string::npos) return true;
    if ((c.fd[0] < 0 && c.fd[1] < 0) || now_s() > until) return false;
    std::vector<pollfd> pfds;
    std::vector<int> which;
    for (int k = 0; k < 2; ++k)
      if (c.fd[k] >= 0) {
        pfds.push_back({c.fd[k], POLLIN, 0});
        which.push_back(k);
      }
    poll(pfds.data(), pfds.size(), 20);
    for (size_t i = 0; i < pfds.size(); ++i)
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) c.read_from(which[i]);
  }
}

ProcResult Process::finish(double deadline_s) {
  detail::collect({child_.get()}, deadline_s);
  return child_->take();
}

std::vector<ProcResult> run_all(const std::vector<SpawnSpec>& specs, double deadline_s) {
  std::vector<Process> ps;
  std::vector<detail::Child*> cs;
  for (auto& s : specs) {
    ps.emplace_back(s);
    cs.push_back(ps.back().child_.get());
  }
  detail::collect(cs, deadline_s);
  std::vector<ProcResult> res;
  for (auto& p : ps) res.push_back(p.child_->take());
  return res;
}

ProcResult run_one(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides,
                   double deadline_s) {
  SpawnSpec s;
  s.argv = argv;
  s.env = make_env(env_overrides);
  s.merge_stderr = true;
  return run_all({s}, deadline_s)[0];
}

std::string find_torch_python() {
  std::vector<std::string> cands;
  if (const char* e = std::getenv("STRATA_PYTHON")) cands.push_back(e);
  cands.push_back("python3");
  cands.push_back("/usr/bin/python3");
  for (const auto& c : cands) {
    std::string cmd = c + " -c 'import torch' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return c;
  }
  return "";
}

std::string tail(const std::string& s, size_t max_chars) {
  if (s.size() <= max_chars) return s;
  return "...[" + std::to_string(s.size() - max_chars) + " chars cut]...\n" + s.substr(s.size() - max_chars);
}

std::string sibling_program(const std::string& built_path) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return built_path;
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/') + 1);
  const std::string beside = dir + built_path.substr(built_path.rfind('/') + 1);
  return access(beside.c_str(), X_OK) == 0 ? beside : built_path;
}

std::string device_under_test() {
  const char* d = std::getenv("STRATA_DEVICE");
  return d && *d ? d : "emulated";
}

std::vector<std::string> lines_containing(const std::string& s, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace strata_test
