#include "job.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>

#include "cluster.hpp"
#include "signals.hpp"
#include "spawn.hpp"
#include "transports/shm/shm_names.hpp"

namespace strata::launcher {
namespace {

// After the last rank exits and its leftovers are killed, the pipes close at once unless
// a process escaped the rank's process group (setsid) and still holds them; we stop
// waiting for such a process after this long.
constexpr std::chrono::milliseconds kLeftoverDrain{1000};

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return std::to_string(sig);
}

std::string seconds_text(double s) {
  std::string t = std::to_string(s);  // "2.000000"
  t.erase(t.find_last_not_of('0') + 1);
  if (t.back() == '.') t.pop_back();
  return t;
}

// A shell's convention, so that `strata-run ...; echo $?` reads like running the rank.
int exit_status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

}  // namespace

Job::Job(const Options& options, JobIdentity identity, const char* const* base_environment,
         const EmulatedCluster* cluster)
    : options_(options),
      identity_(std::move(identity)),
      base_environment_(base_environment),
      cluster_(cluster),
      stdout_sink_(STDOUT_FILENO),
      stderr_sink_(STDERR_FILENO) {
  ranks_.reserve(static_cast<size_t>(options_.nranks));
  for (int r = 0; r < options_.nranks; ++r) {
    std::string prefix = options_.prefix_output ? "[" + std::to_string(r) + "] " : "";
    ranks_.push_back(Rank{r, -1, false, {-1, LineForwarder(stdout_sink_, prefix)},
                          {-1, LineForwarder(stderr_sink_, prefix)}});
  }
}

Job::~Job() {
  for (auto& rank : ranks_) {
    if (rank.running) ::kill(-rank.pid, SIGKILL);
    for (Stream* s : {&rank.out, &rank.err})
      if (s->fd >= 0) ::close(s->fd);
  }
}

int Job::run() {
  start_ranks();
  for (;;) {
    handle_signals();
    reap_children();
    if (running_count() == 0 && !cleaned_up_) after_last_exit();
    if (kill_deadline_ && !killed_ && Clock::now() >= *kill_deadline_) {
      kill_now(std::to_string(running_count()) + " rank(s) still running " +
               seconds_text(options_.grace_seconds) + " s after SIGTERM");
    }
    if (drain_deadline_ && Clock::now() >= *drain_deadline_) {
      for (auto& rank : ranks_) {
        close_stream(rank.out);
        close_stream(rank.err);
      }
    }
    if (cleaned_up_ && !streams_open()) break;

    std::vector<pollfd> fds{{signal_wakeup_fd(), POLLIN, 0}};
    std::vector<Stream*> streams{nullptr};
    for (auto& rank : ranks_) {
      for (Stream* s : {&rank.out, &rank.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;  // the loop top looks at what the signal brought
      throw std::system_error(errno, std::generic_category(), "poll failed");
    }
    // One read per ready stream per round keeps a chatty rank from starving the others.
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) read_stream(*streams[i]);
  }
  return exit_status_;
}

void Job::start_ranks() {
  for (auto& rank : ranks_) {
    RankPlacement where = cluster_ ? cluster_->placement(rank.index)
                                   : RankPlacement{rank.index, options_.nranks, rank.index,
                                                   options_.nranks};
    try {
      RankProcess p = spawn_rank(rank.index, options_.command,
                                 rank_environment(base_environment_, identity_, where),
                                 cluster_ ? cluster_->netns_fd_of_rank(rank.index) : -1);
      rank.pid = p.pid;
      rank.running = true;
      rank.out.fd = p.stdout_fd;
      rank.err.fd = p.stderr_fd;
    } catch (const std::exception& e) {
      stderr_sink_.write("strata-run: cannot start rank " + std::to_string(rank.index) + ": " +
                         e.what() + "\n");
      begin_stop(1);
      return;
    }
  }
}

void Job::handle_signals() {
  PendingSignals p = take_pending_signals();
  if (p.stop_count == 0) return;
  if (!stopping_) {
    stderr_sink_.write("strata-run: got " + signal_name(p.stop_signal) + ", stopping " +
                       std::to_string(running_count()) + " rank(s)\n");
    begin_stop(128 + p.stop_signal);
    p.stop_count--;
  }
  // Asked again while the ranks are still being stopped: the user is out of patience.
  if (p.stop_count > 0 && !killed_ && running_count() > 0)
    kill_now("got " + signal_name(p.stop_signal) + " again");
}

void Job::reap_children() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;  // none has changed (0), or no children left (ECHILD)
    for (auto& rank : ranks_) {
      if (rank.pid == pid && rank.running) {
        on_rank_exit(rank, status);
        break;
      }
    }
  }
}

void Job::on_rank_exit(Rank& rank, int wait_status) {
  rank.running = false;
  bool failed = !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  // Once stopping, exits are mostly our own SIGTERM/SIGKILL at work; not news.
  if (!failed || stopping_) return;
  std::string what = WIFSIGNALED(wait_status)
                         ? "killed by signal " + signal_name(WTERMSIG(wait_status))
                         : "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  stderr_sink_.write("strata-run: rank " + std::to_string(rank.index) + " " + what + "\n");
  if (options_.keep_going) {
    if (exit_status_ == 0) exit_status_ = exit_status_of(wait_status);
    if (int others = running_count(); others > 0)
      stderr_sink_.write("strata-run: the other " + std::to_string(others) + " rank(s) go on (--keep-going)\n");
    return;
  }
  if (int others = running_count(); others > 0)
    stderr_sink_.write("strata-run: stopping the other " + std::to_string(others) +
                       " rank(s)\n");
  begin_stop(exit_status_of(wait_status));
}

void Job::begin_stop(int exit_status) {
  if (stopping_) return;
  stopping_ = true;
  if (exit_status_ == 0) exit_status_ = exit_status;  // --keep-going: a failure came first
  signal_all_groups(SIGTERM);
  // A stopped (SIGSTOP'ed) process only acts on SIGTERM once continued.
  signal_all_groups(SIGCONT);
  kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options_.grace_seconds));
}

void Job::kill_now(const std::string& why) {
  killed_ = true;
  if (running_count() > 0) stderr_sink_.write("strata-run: " + why + ", sending SIGKILL\n");
  signal_all_groups(SIGKILL);
}

// Every group, including those of ranks that already exited: what they left behind goes
// too. A group that is gone gives ESRCH, which is fine.
void Job::signal_all_groups(int sig) {
  for (auto& rank : ranks_)
    if (rank.pid > 0) ::kill(-rank.pid, sig);
}

void Job::after_last_exit() {
  cleaned_up_ = true;
  // Background processes a rank left in its group would otherwise hold its output pipes
  // open (we would wait forever) and outlive the job.
  signal_all_groups(SIGKILL);
  // Those that left their group but are still in an emulated host go too.
  if (cluster_) cluster_->kill_strays();
  // Shared-memory segments of ranks killed before they could unlink them.
  strata::remove_job_segments(identity_.secret);
  drain_deadline_ = Clock::now() + kLeftoverDrain;
}

void Job::read_stream(Stream& stream) {
  char buf[65536];
  ssize_t n = ::read(stream.fd, buf, sizeof buf);
  if (n > 0) {
    stream.lines.feed(std::string_view(buf, static_cast<size_t>(n)));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    close_stream(stream);
  }
}

void Job::close_stream(Stream& stream) {
  if (stream.fd < 0) return;
  ::close(stream.fd);
  stream.fd = -1;
  stream.lines.finish();
}

int Job::running_count() const {
  int n = 0;
  for (const auto& rank : ranks_) n += rank.running ? 1 : 0;
  return n;
}

bool Job::streams_open() const {
  for (const auto& rank : ranks_)
    if (rank.out.fd >= 0 || rank.err.fd >= 0) return true;
  return false;
}

int Job::poll_timeout_ms() const {
  std::optional<Clock::time_point> next;
  if (kill_deadline_ && !killed_) next = kill_deadline_;
  if (drain_deadline_ && (!next || *drain_deadline_ < *next)) next = drain_deadline_;
  if (!next) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace strata::launcher
