// Process helpers shared by the multi-process tests (collectives, failure, api):
// spawn a command with a modified environment, capture its output, enforce a deadline.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace strata_test {

inline double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The environment of this process, minus STRATA_* settings that would change what a
// test exercises (STRATA_DEBUG is kept for debugging), plus `overrides`.
inline std::vector<std::string> make_env(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    if (kv.rfind("STRATA_", 0) == 0 && kv.rfind("STRATA_DEBUG", 0) != 0) continue;
    std::string key = kv.substr(0, kv.find('='));
    if (overrides.count(key)) continue;
    env.push_back(kv);
  }
  for (auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close).
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

inline std::string random_secret_hex() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s += hex[rd() % 16];
  return s;
}

struct ProcResult {
  int status = -1;          // raw wait status
  bool exited = false;      // WIFEXITED
  int exit_code = -1;       // WEXITSTATUS when exited
  int term_signal = 0;      // WTERMSIG when signaled
  bool killed_by_deadline = false;
  double elapsed_s = 0;     // from spawn to reap
  std::string out;          // stdout (merged with stderr when asked)
  std::string err;          // stderr
  std::string describe() const {
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
};

struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  bool merge_stderr = false;  // send stderr to the stdout pipe
};

// Runs several processes at once, each in its own process group, until all exit or
// `deadline_s` passes (then the remaining groups get SIGKILL). Returns one result each.
inline std::vector<ProcResult> run_all(const std::vector<SpawnSpec>& specs, double deadline_s) {
  size_t n = specs.size();
  std::vector<ProcResult> res(n);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> outfd(n, -1), errfd(n, -1);
  std::vector<bool> done(n, false);
  double t0 = now_s();
  for (size_t i = 0; i < n; ++i) {
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
      perror("pipe2");
      abort();
    }
    std::vector<char*> argv, envp;
    for (auto& a : specs[i].argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : specs[i].env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      dup2(po[1], 1);
      dup2(specs[i].merge_stderr ? po[1] : pe[1], 2);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      execve(argv[0], argv.data(), envp.data());
      dprintf(2, "execve %s: %s\n", argv[0], strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so the group exists before we might kill it
    close(po[1]);
    close(pe[1]);
    pids[i] = pid;
    outfd[i] = po[0];
    errfd[i] = pe[0];
  }
  size_t remaining = n;
  bool killed = false;
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<size_t, bool>> who;  // (index, is_err)
    for (size_t i = 0; i < n; ++i) {
      if (outfd[i] >= 0) {
        pfds.push_back({outfd[i], POLLIN, 0});
        who.push_back({i, false});
      }
      if (errfd[i] >= 0) {
        pfds.push_back({errfd[i], POLLIN, 0});
        who.push_back({i, true});
      }
    }
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 20);
    else usleep(20000);
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [i, is_err] = who[k];
      char buf[65536];
      ssize_t r = read(pfds[k].fd, buf, sizeof buf);
      if (r > 0) {
        (is_err ? res[i].err : res[i].out).append(buf, r);
      } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(pfds[k].fd);
        (is_err ? errfd[i] : outfd[i]) = -1;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      int st;
      pid_t w = waitpid(pids[i], &st, WNOHANG);
      if (w == pids[i]) {
        done[i] = true;
        --remaining;
        res[i].status = st;
        res[i].elapsed_s = now_s() - t0;
        res[i].exited = WIFEXITED(st);
        if (WIFEXITED(st)) res[i].exit_code = WEXITSTATUS(st);
        if (WIFSIGNALED(st)) res[i].term_signal = WTERMSIG(st);
        // Anything it left running in its group (ranks of a launcher) goes too.
        kill(-pids[i], SIGKILL);
      }
    }
    if (!killed && now_s() - t0 > deadline_s) {
      killed = true;
      for (size_t i = 0; i < n; ++i)
        if (!done[i]) {
          res[i].killed_by_deadline = true;
          kill(-pids[i], SIGKILL);
          kill(pids[i], SIGKILL);
        }
    }
  }
  // Drain what is left in the pipes (bounded: the writers are gone).
  for (size_t i = 0; i < n; ++i) {
    for (int* fd : {&outfd[i], &errfd[i]}) {
      if (*fd < 0) continue;
      fcntl(*fd, F_SETFL, O_NONBLOCK);
      char buf[65536];
      ssize_t r;
      while ((r = read(*fd, buf, sizeof buf)) > 0) (fd == &errfd[i] ? res[i].err : res[i].out).append(buf, r);
      close(*fd);
    }
  }
  return res;
}

inline ProcResult run_one(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env_overrides,
                          double deadline_s) {
  SpawnSpec s{argv, make_env(env_overrides), true};
  return run_all({s}, deadline_s)[0];
}

// The last `max_chars` characters of `s` (for failure messages).
inline std::string tail(const std::string& s, size_t max_chars = 6000) {
  if (s.size() <= max_chars) return s;
  return "...[" + std::to_string(s.size() - max_chars) + " chars cut]...\n" +
         s.substr(s.size() - max_chars);
}

inline std::vector<std::string> lines_containing(const std::string& s, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace strata_test
