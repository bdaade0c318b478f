#include "cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "command.hpp"
#include "signals.hpp"

namespace strata::launcher {
namespace {

void warn(const std::string& message) {
  std::string line = "strata-run: " + message + "\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

std::string ipv4_text(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

bool parse_uint(std::string_view s, int max, int& out) {
  if (s.empty() || s.size() > 3) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0 && out <= max;
}

}  // namespace

// ---- addresses and placement ----

int Subnet::max_hosts() const {
  uint64_t size = uint64_t{1} << (32 - prefix_len);
  return static_cast<int>(std::min<uint64_t>(size - 2, 1u << 20));
}

std::string Subnet::host_address(int host) const {
  return ipv4_text(network + static_cast<uint32_t>(host) + 1);
}

std::string Subnet::text() const { return ipv4_text(network) + "/" + std::to_string(prefix_len); }

std::optional<Subnet> parse_subnet(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  int len = 0;
  if (!parse_uint(text.substr(slash + 1), 32, len) || len < 8 || len > 30) return std::nullopt;
  std::string_view ip = text.substr(0, slash);
  uint32_t addr = 0;
  for (int i = 0; i < 4; ++i) {
    size_t dot = i < 3 ? ip.find('.') : ip.size();
    if (dot == std::string_view::npos) return std::nullopt;
    int octet = 0;
    if (!parse_uint(ip.substr(0, dot), 255, octet)) return std::nullopt;
    addr = addr << 8 | static_cast<uint32_t>(octet);
    ip.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  uint32_t host_mask = (uint32_t{1} << (32 - len)) - 1;
  if (addr & host_mask) return std::nullopt;
  return Subnet{addr, len};
}

Subnet default_subnet() { return Subnet{(10u << 24) | (231u << 16), 24}; }

int host_of_rank(int rank, int nranks, int hosts) {
  int q = nranks / hosts, r = nranks % hosts;
  int in_big = r * (q + 1);  // ranks on the hosts that get one more
  return rank < in_big ? rank / (q + 1) : r + (rank - in_big) / q;
}

RankPlacement place_rank(int rank, int nranks, int hosts) {
  int q = nranks / hosts, r = nranks % hosts;
  int host = host_of_rank(rank, nranks, hosts);
  int first = host * q + std::min(host, r);
  int size = q + (host < r ? 1 : 0);
  return RankPlacement{rank, nranks, rank - first, size};
}

// ---- the watchdog ----

Watchdog::~Watchdog() { disarm(); }

void Watchdog::start(const std::vector<std::string>& names, const std::string& lock_path) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "cannot create a pipe");
  pid_t pid;
  {
    SignalBlock block;
    pid = ::fork();
    if (pid == 0) {
      // Its own session: neither Ctrl-C at the terminal nor a signal to strata-run's
      // process group reaches it; only the end of strata-run itself does.
      ::setsid();
      struct sigaction sa {};
      sa.sa_handler = SIG_IGN;
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::sigaction(sig, &sa, nullptr);
      sa.sa_handler = SIG_DFL;
      ::sigaction(SIGCHLD, &sa, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::close(p[1]);
      // Nothing to say on stdout; holding it open would keep a reader of strata-run's
      // output waiting. stderr stays, for failures.
      int dev_null = ::open("/dev/null", O_RDWR);
      if (dev_null >= 0) {
        ::dup2(dev_null, STDIN_FILENO);
        ::dup2(dev_null, STDOUT_FILENO);
      }
      char byte = 0;
      ssize_t n;
      while ((n = ::read(p[0], &byte, 1)) < 0 && errno == EINTR) {
      }
      if (n == 1) ::_exit(0);  // strata-run cleaned up itself
      try {
        for (const auto& e : remove_netns(names)) warn(e);
        ::unlink(lock_path.c_str());
      } catch (...) {
      }
      ::_exit(0);
    }
  }
  int fork_errno = errno;
  ::close(p[0]);
  if (pid < 0) {
    ::close(p[1]);
    throw std::system_error(fork_errno, std::generic_category(), "cannot fork");
  }
  pid_ = pid;
  pipe_fd_ = p[1];
}

void Watchdog::disarm() {
  if (pipe_fd_ < 0) return;
  char done = 'd';
  [[maybe_unused]] ssize_t n = ::write(pipe_fd_, &done, 1);
  ::close(pipe_fd_);
  pipe_fd_ = -1;
  // ECHILD when the job's reaping already collected it (it died early): fine.
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

// ---- the cluster ----

EmulatedCluster::EmulatedCluster(const ClusterSpec& spec) : spec_(spec) {
  if (std::string missing = missing_netns_privileges(); !missing.empty())
    throw std::runtime_error(missing);
  pid_t self = ::getpid();
  lock_ = RunLock::acquire(self);
  for (const auto& m : sweep_stale_netns(self)) warn(m);

  std::string prefix = netns_prefix(self);
  for (int h = 0; h < spec_.hosts; ++h) host_ns_.push_back(prefix + "h" + std::to_string(h));
  if (spec_.hosts > 2) switch_ns_ = prefix + "sw";
  watchdog_.start(all_names(), lock_.path());
  try {
    build();
    for (const auto& name : host_ns_) host_fds_.push_back(open_netns(name));
  } catch (...) {
    teardown();
    throw;
  }
}

EmulatedCluster::~EmulatedCluster() { teardown(); }

std::vector<std::string> EmulatedCluster::all_names() const {
  std::vector<std::string> names = host_ns_;
  if (!switch_ns_.empty()) names.push_back(switch_ns_);
  return names;
}

void EmulatedCluster::build() {
  for (const auto& name : host_ns_) add_netns(name);
  if (spec_.hosts == 1) return;  // a host alone: loopback only

  auto ip = [](const std::string& ns, std::vector<std::string> args) {
    args.insert(args.begin(), {"ip", "-n", ns});
    run_checked(args);
  };
  if (switch_ns_.empty()) {
    // Two hosts: one cable between them.
    ip(host_ns_[0], {"link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
                     host_ns_[1]});
  } else {
    // A switch: a bridge in its own namespace, port h<i> cabled to host i's eth0.
    add_netns(switch_ns_);
    ip(switch_ns_, {"link", "add", "br0", "type", "bridge"});
    ip(switch_ns_, {"link", "set", "br0", "up"});
    for (int h = 0; h < spec_.hosts; ++h) {
      std::string port = "h" + std::to_string(h);
      ip(switch_ns_, {"link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
                      host_ns_[h]});
      ip(switch_ns_, {"link", "set", port, "master", "br0"});
      ip(switch_ns_, {"link", "set", port, "up"});
    }
  }
  for (int h = 0; h < spec_.hosts; ++h) {
    ip(host_ns_[h], {"addr", "add",
                     spec_.subnet.host_address(h) + "/" + std::to_string(spec_.subnet.prefix_len),
                     "dev", "eth0"});
    ip(host_ns_[h], {"link", "set", "eth0", "up"});
  }
  wait_for_carrier();
  if (!spec_.rate) return;
  // Each direction of each host's link is shaped once on its way out: host -> network on
  // the host's eth0, network -> host on the switch port facing it (with two hosts, that
  // is the other host's eth0).
  TbfParams tbf = tbf_params(*spec_.rate);
  for (int h = 0; h < spec_.hosts; ++h) {
    shape_egress(host_ns_[h], "eth0", tbf);
    if (!switch_ns_.empty()) shape_egress(switch_ns_, "h" + std::to_string(h), tbf);
  }
}

// A veth end is up a moment before the kernel says its cable is (NO-CARRIER): ranks started
// then find eth0 down, and UCX leaves it out of its devices for good. Setup waits for every
// host's eth0 to be up, as a real cluster's ranks start on links that are.
void EmulatedCluster::wait_for_carrier() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const std::string& ns : host_ns_) {
    for (;;) {
      const CommandResult r = run_command({"ip", "-n", ns, "-o", "link", "show", "eth0"});
      if (r.ok() && r.output.find("state UP") != std::string::npos) break;
      if (std::chrono::steady_clock::now() > until)
        throw std::runtime_error("host namespace " + ns + ": eth0 is not up 10 s after setup: " + r.output);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void EmulatedCluster::teardown() noexcept {
  for (int fd : host_fds_) ::close(fd);
  host_fds_.clear();
  std::vector<std::string> errors = remove_netns(all_names());
  for (const auto& e : errors) warn(e);
  // With a failure left over, the lock file stays: the next run's sweep retries.
  if (errors.empty()) lock_.release_and_remove();
  watchdog_.disarm();
}

std::string EmulatedCluster::root_address() const {
  std::string host = spec_.hosts == 1 ? "127.0.0.1" : spec_.subnet.host_address(0);
  return host + ":" + std::to_string(kClusterRootPort);
}

RankPlacement EmulatedCluster::placement(int rank) const {
  return place_rank(rank, spec_.nranks, spec_.hosts);
}

int EmulatedCluster::netns_fd_of_rank(int rank) const {
  return host_fds_.at(static_cast<size_t>(host_of_rank(rank, spec_.nranks, spec_.hosts)));
}

void EmulatedCluster::kill_strays() const {
  for (int fd : host_fds_) kill_processes_in(fd);
}

}  // namespace strata::launcher
