#include "command.hpp"
#include "throw_errno.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "signals.hpp"

namespace strata::launcher {
namespace {

// Root's PATH normally has the sbin directories; a stripped-down one (sudo, cron, CI)
// may not, and iproute2 lives there.
std::string find_tool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string dirs = ::getenv("PATH") ? ::getenv("PATH") : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty()) {
      std::string path = dir + "/" + name;
      if (::access(path.c_str(), X_OK) == 0) return path;
    }
    start = end + 1;
  }
  return name;  // exec fails with ENOENT and the caller reports it
}

}  // namespace

bool CommandResult::ok() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string command_text(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

CommandResult run_command(const std::vector<std::string>& argv) {
  std::string path = find_tool(argv.at(0));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("cannot create a pipe");
  int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid;
  {
    SignalBlock block;
    pid = ::fork();
    if (pid == 0) {
      restore_signals_in_child();
      ::setpgid(0, 0);
      if (dev_null >= 0) ::dup2(dev_null, STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      ::execv(path.c_str(), args.data());
      static const char kMsg[] = "cannot execute it (is iproute2 installed?)\n";
      [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
      ::_exit(127);
    }
  }
  int fork_errno = errno;
  ::close(out[1]);
  if (dev_null >= 0) ::close(dev_null);
  if (pid < 0) {
    ::close(out[0]);
    errno = fork_errno;
    throw_errno("cannot fork");
  }

  CommandResult r;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) r.output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(out[0]);
  while (::waitpid(pid, &r.wait_status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

void run_checked(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv);
  if (r.ok()) return;
  std::string how = WIFEXITED(r.wait_status)
                        ? "exit status " + std::to_string(WEXITSTATUS(r.wait_status))
                        : "signal " + std::to_string(WTERMSIG(r.wait_status));
  std::string output = r.output;
  while (!output.empty() && output.back() == '\n') output.pop_back();
  throw std::runtime_error("`" + command_text(argv) + "` failed (" + how + ")" +
                           (output.empty() ? "" : ": " + output));
}

}  // namespace strata::launcher
