// What a job of many ranks costs: creation (from the first rank's start to the last first
// call's return), and what each rank holds afterwards (file descriptors, memory, shared
// memory) beside what docs/architecture.md's formulas say it should. Every rank runs a
// checked all_reduce and a barrier (with --all: every collective at several sizes); rank 0
// prints one JSON line. perf/scale runs it at many sizes; tests/scale checks it at 64 ranks.
//   strata-run -n 64 --hosts 8 -- strata-scale-probe [--all] [--kill RANK]
// --kill RANK: that rank dies (SIGKILL) once created; every other rank's all_reduce must
// fail naming it (each prints "NAMED <rank> after <s>" or "NOT-NAMED: <error>").
#include <dirent.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/comm_info.hpp"
#include "ground/settings.hpp"
#include "strata/strata.hpp"
#include "transports/shm/shm_segment.hpp"

using namespace strata;

namespace {

double boottime_s() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// When this process started, on CLOCK_BOOTTIME (/proc/self/stat's starttime, in ticks).
double process_start_s() {
  std::ifstream f("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(all.substr(all.rfind(')') + 2));  // fields from the 3rd on
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  return std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Fds {
  long all = 0, sockets = 0, memfds = 0;
};
Fds operator-(Fds a, Fds b) { return {a.all - b.all, a.sockets - b.sockets, a.memfds - b.memfds}; }

Fds count_fds() {
  Fds n;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return n;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = "";
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t len = readlink(path.c_str(), target, sizeof target - 1);
    if (len < 0) continue;  // the directory's own descriptor, closed meanwhile
    ++n.all;
    n.sockets += std::strncmp(target, "socket:", 7) == 0;
    n.memfds += std::strncmp(target, "/memfd:", 7) == 0;
  }
  closedir(d);
  return n - Fds{1, 0, 0};  // opendir's own
}

// Proportional set size (KiB) of this process's shared mappings: Strata's segments in
// /dev/shm, and memfd memory (scratch, strata::alloc). Summed over the ranks of a host it
// is the host's shared memory, counted once.
struct Shared {
  long segment_kib = 0, memfd_kib = 0;
};
Shared shared_pss() {
  std::ifstream f("/proc/self/smaps");
  Shared s;
  std::string line;
  long* current = nullptr;
  while (std::getline(f, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 17) {
      current = line.find("/dev/shm/strata-") != std::string::npos ? &s.segment_kib
                : line.find("/memfd:") != std::string::npos      ? &s.memfd_kib
                                                                  : nullptr;
    } else if (current && line.rfind("Pss:", 0) == 0) {
      *current += std::atol(line.c_str() + 4);
    }
  }
  return s;
}

long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}

// What every rank reports to rank 0.
struct Report {
  double start_s, first_return_s;
  int64_t fds, fds_expected, sockets, control, shm_links, tcp_links, other_links, rss_kib, hwm_kib, segment_kib,
      segment_expected_kib, memfd_kib, wrong;
};

// all_reduce of floats whose sum is known: rank r holds r + 1 + (i % 7).
int64_t checked_all_reduce(Comm& c, size_t count) {
  const int n = c.size();
  std::vector<float> x(count), y(count, -1.f);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(c.rank() + 1 + static_cast<int>(i % 7));
  c.all_reduce(x.data(), y.data(), count, DataType::float32, ReduceOp::sum);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += y[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
  return wrong;
}

// Every collective at a few sizes (its results are not checked here: strata-perf -c 1 and
// the collectives tests do), so every pair a job of this shape connects is connected.
void every_collective(Comm& c) {
  const int n = c.size();
  for (size_t bytes : {size_t{8}, size_t{4096}, size_t{1} << 20}) {
    const size_t count = std::max<size_t>(1, bytes / 4);
    std::vector<float> a(count * n, 1.f), b(count * n);
    c.all_reduce(a.data(), b.data(), count, DataType::float32, ReduceOp::sum);
    c.reduce_scatter(a.data(), b.data(), count, DataType::float32, ReduceOp::sum);
    c.all_gather(a.data(), b.data(), count, DataType::float32);
    c.broadcast(a.data(), b.data(), count, DataType::float32, 0);
    c.reduce(a.data(), b.data(), count, DataType::float32, ReduceOp::sum, 0);
    c.all_to_all(a.data(), b.data(), std::max<size_t>(1, count / n), DataType::float32);
  }
  c.barrier();
}

int kill_test(Comm& c, int victim) {
  if (c.rank() == victim) raise(SIGKILL);
  const double t0 = boottime_s();
  try {
    checked_all_reduce(c, 1 << 16);
    c.barrier();
    std::printf("NOT-NAMED: the calls succeeded without rank %d\n", victim);
    return 1;
  } catch (const PeerError& e) {
    const bool named = e.peer() == victim;
    if (named) std::printf("NAMED %d after %.3f s\n", victim, boottime_s() - t0);
    else std::printf("NOT-NAMED: %s\n", e.what());
    std::fflush(stdout);
    // Stay a moment, as a program does that handles the error: a survivor that exits at once
    // can close a connection a slower peer made to it after it had told its peers the
    // verdict, and that peer then names the survivor (a race of its own, not what this
    // probe measures; docs/reliability.md).
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return named ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double start = process_start_s();
  bool all = false;
  int victim = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--all") == 0) all = true;
    else if (std::strcmp(argv[i], "--kill") == 0 && i + 1 < argc) victim = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: strata-scale-probe [--all] [--kill RANK]\n");
      return 2;
    }
  }
  const Fds before = count_fds();
  try {
    Comm c = Comm::init_from_env();
    if (victim >= 0) return kill_test(c, victim);
    Report me{};
    me.start_s = start;
    me.wrong = checked_all_reduce(c, 1 << 16);
    me.first_return_s = boottime_s();
    c.barrier();
    if (all) every_collective(c);
    // A knock at this rank's listener (a peer's probe asking it to connect) may still be
    // held, accepted and not yet read, when the count is taken: the ranks settle and count
    // again (a few times at most) until every count is what the formula says.
    for (int settle = 0;; ++settle) {
      const Fds held = count_fds() - before;
      const Connections conn = connections(c);
      me.shm_links = me.tcp_links = me.other_links = 0;
      for (const auto& [name, count] : conn.host_links) {
        if (name == "shm") me.shm_links = count;
        else if (name == "tcp") me.tcp_links = count;
        else me.other_links += count;
      }
      const char* nsocks = std::getenv("STRATA_TCP_NSOCKS");
      // docs/architecture.md, "What a rank holds": the listener, a control socket per
      // connected peer, STRATA_TCP_NSOCKS data sockets per tcp link, one descriptor for this
      // rank's shared-memory segment once it has a shm link, and one per region of host
      // scratch (memfd memory, counted here as found).
      me.fds = held.all;
      me.sockets = held.sockets;
      me.control = conn.control;
      me.fds_expected = 1 + conn.control + me.tcp_links * (nsocks ? std::atoi(nsocks) : 2) + (me.shm_links > 0 ? 1 : 0) + held.memfds;
      int32_t ok = me.other_links > 0 || me.fds == me.fds_expected, all_ok = 0;
      c.all_reduce(&ok, &all_ok, 1, DataType::int32, ReduceOp::min);
      if (all_ok || settle == 4) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    me.rss_kib = status_kib("VmRSS:");
    me.hwm_kib = status_kib("VmHWM:");
    // docs/architecture.md: this rank's segment, once it has a shm link, is a page of header
    // and one per ring (a ring per other rank of the host), and each shm link it receives on
    // fills its ring's stride (FIFO, inline ring, header).
    const std::vector<HierarchyLevel> levels = c.hierarchy();
    int on_host = c.size();
    if (!levels.empty())
      on_host = static_cast<int>(std::count(levels.front().group.begin(), levels.front().group.end(),
                                            levels.front().group[static_cast<size_t>(c.rank())]));
    const Config cfg = Config::from_env();
    const int64_t stride = static_cast<int64_t>(
        ShmSegment::stride(shm_fifo_bytes(cfg.shm_rank_bytes, cfg.shm_ring_bytes, std::max(on_host - 1, 1))));
    me.segment_expected_kib = me.shm_links ? (4096 * on_host + me.shm_links * (stride - 4096)) / 1024 : 0;
    const Shared sh = shared_pss();
    me.segment_kib = sh.segment_kib;
    me.memfd_kib = sh.memfd_kib;
    std::vector<Report> reports(static_cast<size_t>(c.size()));
    c.all_gather(&me, reports.data(), sizeof me, DataType::uint8);
    if (c.rank() == 0) {
      double first = 1e300, last = 0;
      int64_t fds = 0, expected_ok = 1, control = 0, rss = 0, hwm = 0, seg = 0, seg_expected = 0, memfd = 0, wrong = 0,
              tcp = 0, shm = 0;
      for (const Report& r : reports) {
        first = std::min(first, r.start_s);
        last = std::max(last, r.first_return_s);
        fds = std::max(fds, r.fds);
        expected_ok &= r.other_links > 0 || r.fds == r.fds_expected;
        control = std::max(control, r.control);
        tcp = std::max(tcp, r.tcp_links);
        shm = std::max(shm, r.shm_links);
        rss = std::max(rss, r.rss_kib);
        hwm = std::max(hwm, r.hwm_kib);
        seg += r.segment_kib;
        seg_expected += r.segment_expected_kib;
        memfd += r.memfd_kib;
        wrong += r.wrong;
      }
      const std::vector<HierarchyLevel> levels = c.hierarchy();
      size_t hosts = 1;  // the groups of the innermost level (node)
      if (!levels.empty()) hosts = static_cast<size_t>(*std::max_element(levels.front().group.begin(), levels.front().group.end()) + 1);
      std::printf(
          "{\"ranks\": %d, \"hosts\": %zu, \"creation_s\": %.3f, \"fds_max\": %lld, \"fds_formula_holds\": %s, "
          "\"control_peers_max\": %lld, \"tcp_links_max\": %lld, \"shm_links_max\": %lld, \"rss_max_kib\": %lld, "
          "\"hwm_max_kib\": %lld, \"segments_kib\": %lld, \"segments_formula_kib\": %lld, \"segments_formula_holds\": %s, "
          "\"memfd_kib\": %lld, \"all_reduce_wrong\": %lld}\n",
          c.size(), hosts, last - first, static_cast<long long>(fds), expected_ok ? "true" : "false",
          static_cast<long long>(control), static_cast<long long>(tcp), static_cast<long long>(shm),
          static_cast<long long>(rss), static_cast<long long>(hwm), static_cast<long long>(seg),
          static_cast<long long>(seg_expected),
          // Pss is summed from whole KiB per mapping: a few KiB per rank either way.
          std::llabs(seg - seg_expected) <= 8 * c.size() + seg_expected / 100 ? "true" : "false",
          static_cast<long long>(memfd), static_cast<long long>(wrong));
      std::fflush(stdout);
    }
    const bool ok = me.wrong == 0;
    c.destroy();
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "strata-scale-probe: %s\n", e.what());
    return 1;
  }
}
