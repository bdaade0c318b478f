#include "netns.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <system_error>
#include <thread>
#include <utility>

#include "command.hpp"

namespace strata::launcher {
namespace {

constexpr const char* kNetnsDir = "/run/netns";     // iproute2's
constexpr const char* kLockDir = "/run/strata-run";  // ours

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

std::string lock_path(pid_t pid) {
  return std::string(kLockDir) + "/" + std::to_string(pid) + ".lock";
}

bool netns_exists(const std::string& name) {
  struct stat st {};
  return ::stat((std::string(kNetnsDir) + "/" + name).c_str(), &st) == 0;
}

// The pid in "strata-<pid>-<rest>", or -1.
pid_t pid_of_name(const std::string& name) {
  static const std::string kHead = "strata-";
  if (!name.starts_with(kHead)) return -1;
  size_t end = name.find('-', kHead.size());
  if (end == std::string::npos || end == kHead.size() || end + 1 == name.size()) return -1;
  pid_t pid = 0;
  for (size_t i = kHead.size(); i < end; ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 100000000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

}  // namespace

std::string missing_netns_privileges() {
  std::ifstream status("/proc/self/status");
  std::string line;
  unsigned long long caps = 0;
  while (std::getline(status, line))
    if (line.starts_with("CapEff:")) caps = std::strtoull(line.c_str() + 7, nullptr, 16);
  constexpr int kNetAdmin = 12, kSysAdmin = 21;
  bool net = caps & (1ull << kNetAdmin), sys = caps & (1ull << kSysAdmin);
  if (net && sys) return {};
  // Root has both; a process given only some capabilities is told which one it lacks.
  return std::string("--hosts needs root (") + (net ? "CAP_SYS_ADMIN" : "CAP_NET_ADMIN") +
         ") to create network namespaces";
}

std::string netns_prefix(pid_t pid) { return "strata-" + std::to_string(pid) + "-"; }

void add_netns(const std::string& name) {
  run_checked({"ip", "netns", "add", name});
  run_checked({"ip", "-n", name, "link", "set", "lo", "up"});
}

int open_netns(const std::string& name) {
  std::string path = std::string(kNetnsDir) + "/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open " + path);
  return fd;
}

int kill_processes_in(int netns_fd) {
  struct stat ns {};
  if (::fstat(netns_fd, &ns) != 0) return 0;
  int killed = 0;
  for (int round = 0; round < 200; ++round) {
    int found = 0;
    if (DIR* proc = ::opendir("/proc")) {
      while (dirent* e = ::readdir(proc)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
        struct stat st {};
        std::string path = std::string("/proc/") + e->d_name + "/ns/net";
        if (::stat(path.c_str(), &st) != 0 || st.st_dev != ns.st_dev || st.st_ino != ns.st_ino)
          continue;
        if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++found;
      }
      ::closedir(proc);
    }
    if (found == 0) break;
    killed += found;
    // Give the kernel a moment to let them go (and catch any child forked meanwhile).
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return killed;
}

std::vector<std::string> remove_netns(const std::vector<std::string>& names) {
  std::vector<std::string> errors;
  for (const auto& name : names) {
    if (!netns_exists(name)) continue;
    try {
      int fd = open_netns(name);
      kill_processes_in(fd);
      ::close(fd);
      run_checked({"ip", "netns", "del", name});
    } catch (const std::exception& e) {
      errors.push_back("cannot remove network namespace " + name + ": " + e.what());
    }
  }
  return errors;
}

RunLock RunLock::acquire(pid_t pid) {
  if (::mkdir(kLockDir, 0755) != 0 && errno != EEXIST)
    throw_errno(std::string("cannot create ") + kLockDir);
  RunLock lock;
  lock.path_ = lock_path(pid);
  for (;;) {
    int fd = ::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("cannot open " + lock.path_);
    // Another run's sweep holds it for a moment at most; a holder that does not let go
    // is a live strata-run with our pid, i.e. in another pid namespace sharing /run.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() > give_up) {
        int e = errno;
        ::close(fd);
        errno = e;
        throw_errno("cannot lock " + lock.path_ + " (held by another strata-run?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // A sweep may have removed the file while we waited: then the lock we got guards
    // nothing anyone else can find. Start over on a fresh file.
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(lock.path_.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      lock.fd_ = fd;
      return lock;
    }
    ::close(fd);
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunLock::RunLock(RunLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

void RunLock::release_and_remove() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

std::vector<std::string> sweep_stale_netns(pid_t self) {
  std::map<pid_t, std::vector<std::string>> by_run;
  if (DIR* dir = ::opendir(kNetnsDir)) {
    while (dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      if (pid_t pid = pid_of_name(name); pid > 0) by_run[pid].push_back(name);
    }
    ::closedir(dir);
  }
  std::vector<std::string> messages;
  for (auto& [pid, names] : by_run) {
    std::sort(names.begin(), names.end());
    int fd = -1;
    if (pid != self) {
      // Holding the run's lock for the whole removal keeps a new run that happens to get
      // the same pid from creating namespaces under these names meanwhile.
      fd = ::open(lock_path(pid).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) continue;
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // that run is alive
        ::close(fd);
        continue;
      }
    }
    std::vector<std::string> errors = remove_netns(names);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    messages.push_back(errors.empty() ? "removed network namespaces left by an earlier run: " + list
                                      : errors.front());
    if (fd >= 0) {
      if (errors.empty()) ::unlink(lock_path(pid).c_str());
      ::close(fd);
    }
  }
  return messages;
}

}  // namespace strata::launcher
