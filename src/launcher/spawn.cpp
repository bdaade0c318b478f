#include "spawn.hpp"
#include "throw_errno.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "signals.hpp"

namespace strata::launcher {
namespace {

// Owns a file descriptor until release(); keeps error paths from leaking pipes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

struct ChildSetup {
  pid_t launcher;
  int stdin_fd, stdout_fd, stderr_fd;
  int netns_fd;
  char* const* argv;
  char* const* envp;
  const std::string& exec_error_prefix;
  const std::string& netns_error_prefix;
  const std::string& sysfs_error_prefix;
};

void write_error(const std::string& prefix) {
  const char* reason = std::strerror(errno);
  write_all(STDERR_FILENO, prefix.data(), prefix.size());
  write_all(STDERR_FILENO, reason, std::strlen(reason));
  write_all(STDERR_FILENO, "\n", 1);
}

// Runs between fork and exec, so it sticks to async-signal-safe calls (strerror aside,
// which is safe here because strata-run has no other threads).
[[noreturn]] void run_child(const ChildSetup& c) {
  restore_signals_in_child();
  // Its own group, so that stopping the rank also stops whatever it started. The parent
  // does the same, whichever runs first wins and both agree.
  ::setpgid(0, 0);
  // If strata-run dies without a chance to clean up (SIGKILL), take the rank down with it
  // rather than leave an orphan waiting forever for its peers.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != c.launcher) ::_exit(127);

  // dup2 clears O_CLOEXEC on the copies; every other descriptor of ours is close-on-exec.
  if (::dup2(c.stdin_fd, STDIN_FILENO) < 0 || ::dup2(c.stdout_fd, STDOUT_FILENO) < 0 ||
      ::dup2(c.stderr_fd, STDERR_FILENO) < 0)
    ::_exit(127);

  // An emulated host (--hosts): the rank sees only its namespace's network, and, as under
  // `ip netns exec`, a /sys of its own mounted afresh from inside that namespace, so
  // /sys/class/net lists the host's eth0 and lo (UCX finds its devices there). The mount
  // namespace is the rank's own copy, its mounts slaves of the machine's: nothing it
  // mounts reaches the machine.
  if (c.netns_fd >= 0) {
    if (::setns(c.netns_fd, CLONE_NEWNET) != 0) {
      write_error(c.netns_error_prefix);
      ::_exit(127);
    }
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0 ||
        (::umount2("/sys", MNT_DETACH) != 0 && errno != EINVAL) ||
        ::mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      write_error(c.sysfs_error_prefix);
      ::_exit(127);
    }
  }

  ::execvpe(c.argv[0], c.argv, c.envp);

  write_error(c.exec_error_prefix);
  ::_exit(127);
}

}  // namespace

RankProcess spawn_rank(int rank, const std::vector<std::string>& command,
                       const std::vector<std::string>& environment, int netns_fd) {
  // Everything the child needs is built here, before fork.
  std::vector<char*> argv = c_strings(command);
  std::vector<char*> envp = c_strings(environment);
  std::string exec_error_prefix =
      "strata-run: rank " + std::to_string(rank) + ": cannot execute " + command[0] + ": ";
  std::string netns_error_prefix =
      "strata-run: rank " + std::to_string(rank) + ": cannot enter its host's network namespace: ";
  std::string sysfs_error_prefix =
      "strata-run: rank " + std::to_string(rank) + ": cannot mount its host's own /sys (as ip netns exec does): ";

  Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (dev_null.get() < 0) throw_errno("cannot open /dev/null");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("cannot create a pipe");
  Fd out_read(out[0]), out_write(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) throw_errno("cannot create a pipe");
  Fd err_read(err[0]), err_write(err[1]);

  ChildSetup setup{::getpid(),  dev_null.get(), out_write.get(),   err_write.get(),
                   netns_fd,     argv.data(),    envp.data(),       exec_error_prefix,
                   netns_error_prefix, sysfs_error_prefix};
  pid_t pid;
  {
    SignalBlock block;
    pid = ::fork();
    if (pid == 0) run_child(setup);
  }
  if (pid < 0) throw_errno("cannot fork");
  // Also set from this side, so the group exists before we might signal it. EACCES means
  // the child has already exec'd, which it only does after setting the group itself.
  ::setpgid(pid, pid);

  return {pid, out_read.release(), err_read.release()};
}

}  // namespace strata::launcher
