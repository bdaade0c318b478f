#include "ground/settings.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "strata/error.hpp"

namespace strata {

namespace settings {

namespace {

using T = Type;
using L = Lifetime;
constexpr double K = 1024, M = K * K, G = M * K;
constexpr double kRanks = 1 << 24;

// Every STRATA_* variable: the one list. docs/environment.md documents each (checked by
// tests/unit/test_settings.cpp).
constexpr Setting kTable[] = {
    // Set by strata-run for each rank (other launchers' variables: core/bootstrap/launch_env.cpp).
    {"STRATA_RANK", T::integer, 0, 0, kRanks - 1, nullptr, L::communicator, "this rank, for Comm::init_from_env()"},
    {"STRATA_WORLD_SIZE", T::integer, 1, 1, kRanks, nullptr, L::communicator, "the job's size, for Comm::init_from_env()"},
    {"STRATA_LOCAL_RANK", T::integer, 0, 0, kRanks - 1, nullptr, L::communicator, "this rank among its host's (set by strata-run)"},
    {"STRATA_LOCAL_SIZE", T::integer, 1, 1, kRanks, nullptr, L::communicator, "ranks on this host (set by strata-run)"},
    {"STRATA_ROOT", T::text, 0, 0, 0, nullptr, L::communicator, "host:port of the bootstrap root; rank 0 listens there"},
    {"STRATA_ROOT_FILE", T::text, 0, 0, 0, nullptr, L::communicator, "a file on a shared filesystem through which rank 0 passes its unique id"},
    {"STRATA_ROOT_PORT", T::integer, 0, 0, 65535, nullptr, L::communicator, "the root's port where its host comes from the launcher (torchrun, Slurm); 0: derived"},
    {"STRATA_SECRET", T::text, 0, 0, 0, nullptr, L::communicator, "32 hex digits every connection must present"},
    // Bootstrap, logging, kernels.
    {"STRATA_SOCKET_IFNAME", T::text, 0, 0, 0, nullptr, L::communicator, "interface whose address get_unique_id() puts in the id"},
    {"STRATA_DEBUG", T::text, 0, 0, 0, "NONE|WARN|INFO|TRACE", L::process, "log level"},
    {"STRATA_REDUCE_ISA", T::text, 0, 0, 0, "auto|generic", L::process, "generic: the baseline reduction kernels instead of AVX2/F16C (auto: by CPU)"},
    {"STRATA_TOPO_FILE", T::text, 0, 0, 0, nullptr, L::process, "an hwloc XML file to use as this host's topology"},
    // The device layer (ground/device/, docs/device.md).
    {"STRATA_DEVICE", T::text, 0, 0, 0, "auto|cuda|emulated|none", L::process, "device backend (auto: cuda where an NVIDIA driver and GPU exist, else none)"},
    {"STRATA_EMULATED_DELAY_US", T::integer, 0, 0, 1000000, nullptr, L::process, "emulated streams sleep a random 0..N us before each task"},
    {"STRATA_EMULATED_CUDA_RULES", T::integer, 1, 0, 1, nullptr, L::process, "1: the emulated backend blocks as CUDA does (context lock, pageable copies, legacy default stream)"},
    {"STRATA_EMULATED_LOCK_WAIT", T::number, 20, 0.01, 1e6, nullptr, L::process, "seconds an emulated call waits for the context lock before it fails, saying a GPU would hang"},
    {"STRATA_HOST", T::text, 0, 0, 0, nullptr, L::communicator, "host identity override: equal values use shared memory"},
    // The communicator.
    {"STRATA_TIMEOUT", T::number, 300, 0.1, 1e7, nullptr, L::communicator, "seconds without progress before a peer is declared stuck"},
    {"STRATA_CHECK", T::integer, 0, 0, 1, nullptr, L::communicator, "1: ranks compare each call's description before running it"},
    {"STRATA_TRANSPORT", T::text, 0, 0, 0, "shm|tcp|ucx|ibverbs", L::communicator, "forces a transport between all ranks"},
    // Its names are the algorithms' own list (algorithms/select.cpp), checked when a
    // communicator is created: the ground does not know the algorithms.
    {"STRATA_ALGO", T::text, 0, 0, 0, nullptr, L::communicator, "forces an algorithm where it implements the collective"},
    {"STRATA_CHUNK_BYTES", T::integer, 512 * K, 64, G, nullptr, L::communicator, "pipelining chunk of chains (overrides the tuner)"},
    {"STRATA_HIERARCHY", T::text, 0, 0, 0, nullptr, L::communicator, "emulated levels, e.g. node:2,island:2"},
    {"STRATA_LINK_MODEL", T::text, 0, 0, 0, nullptr, L::communicator, "the tuner's link models, level:latency:bandwidth,..."},
    // Transports.
    {"STRATA_SHM_RING_BYTES", T::integer, 4 * M, 4096, G, nullptr, L::communicator, "capacity of each shared-memory FIFO, at most"},
    {"STRATA_SHM_RANK_BYTES", T::integer, 10 * M, 4096, 1LL << 40, nullptr, L::communicator, "FIFO bytes a rank receives into, shared among the ranks of its host: each FIFO holds this / (ranks on the host - 1), at most STRATA_SHM_RING_BYTES"},
    {"STRATA_SHM_STREAM_BYTES", T::integer, 256 * K, 0, 1LL << 40, nullptr, L::communicator, "receives this large write with non-temporal stores"},
    {"STRATA_SHM_ZEROCOPY_BYTES", T::integer, 65536, 0, 1LL << 40, nullptr, L::communicator, "transfers this large from shareable host memory are read from the sender's buffer (0: off)"},
    {"STRATA_SHM_ZEROCOPY_PUSH", T::integer, 1, 0, 1, nullptr, L::communicator, "a two-rank forward is written into the receiver's shareable buffer as it is reduced (0: the receiver reads it)"},
    {"STRATA_TCP_NSOCKS", T::integer, 2, 1, 16, nullptr, L::communicator, "tcp data sockets per peer"},
    {"STRATA_TCP_STAGING_BYTES", T::integer, 1 * M, 4096, G, nullptr, L::communicator, "receive buffer per tcp socket for reducing receives"},
    {"STRATA_UCX_CHUNK_BYTES", T::integer, 1 * M, 4096, G, nullptr, L::communicator, "ucx: message size transfers are cut into"},
    {"STRATA_UCX_STAGING_CHUNKS", T::integer, 4, 1, 64, nullptr, L::communicator, "ucx: staging chunks and put slots per peer"},
    {"STRATA_UCX_PUT_CHUNK_BYTES", T::integer, 256 * K, 4096, G, nullptr, L::communicator, "ucx: message size on links that put"},
    {"STRATA_UCX_PUTS", T::text, 0, 0, 0, "auto|0|1", L::communicator, "ucx: RMA puts (auto: on one host over shared memory)"},
    {"STRATA_IPC_CACHE_ENTRIES", T::integer, 64, 1, 65536, nullptr, L::communicator, "ipc and shm zero-copy: a peer's allocations held mapped per link (least recently used evicted)"},
    {"STRATA_STAGING_CHUNK_BYTES", T::integer, 1 * M, 256, G, nullptr, L::communicator, "staging: device transfers between hosts go in chunks of this size (multiple of 64)"},
    {"STRATA_STAGING_SLOTS", T::integer, 4, 2, 64, nullptr, L::communicator, "staging: pinned host chunks per link and direction"},
    {"STRATA_IB_HCA", T::text, 0, 0, 0, nullptr, L::communicator, "ibverbs: devices and ports, NCCL_IB_HCA grammar"},
    {"STRATA_IB_GID_INDEX", T::integer, -1, -1, 255, nullptr, L::communicator, "ibverbs: RoCE GID index (-1: auto)"},
    {"STRATA_IB_CHUNK_BYTES", T::integer, 512 * K, 4096, 64 * M, nullptr, L::communicator, "ibverbs: ring slot size"},
    {"STRATA_IB_SLOTS", T::integer, 8, 2, 1024, nullptr, L::communicator, "ibverbs: ring slots per queue pair and direction"},
    {"STRATA_IB_TIMEOUT", T::integer, 18, 1, 31, nullptr, L::communicator, "ibverbs: queue-pair ack timeout exponent"},
    {"STRATA_IB_RETRY_CNT", T::integer, 7, 0, 7, nullptr, L::communicator, "ibverbs: queue-pair retry count"},
    {"STRATA_IB_MAX_NICS", T::integer, 16, 1, 16, nullptr, L::communicator, "ibverbs: ports a link stripes over"},
    // Tests.
    {"STRATA_PYTHON", T::text, 0, 0, 0, nullptr, L::process, "tests: the python3 that has torch"},
    {"STRATA_TRAIN_TEST_DEVICE", T::text, 0, 0, 0, nullptr, L::process,
     "tests: the device test_training's DeviceKernels run on (emulated; cuda on a GPU)"},
};

std::string range(double lo, double hi) {
  auto num = [](double x) {
    std::string t = std::to_string(x);
    if (x == static_cast<double>(static_cast<long long>(x))) t = std::to_string(static_cast<long long>(x));
    return t;
  };
  return "[" + num(lo) + ", " + num(hi) + "]";
}

std::string choices_list(std::string_view choices) {
  std::string out(choices);
  for (size_t i = 0; (i = out.find('|', i)) != std::string::npos;) out.replace(i, 1, ", ");
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const Setting> all() { return kTable; }

const Setting& find(std::string_view name) {
  for (const Setting& s : kTable)
    if (name == s.name) return s;
  throw InternalError("setting " + std::string(name) + " is not declared in ground/settings.cpp");
}

std::optional<std::string> raw(const char* name) {
  find(name);  // a name the table lacks is a bug here, not the user's
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool is_set(const char* name) { return raw(name).has_value(); }

long long parse_integer(std::string_view name, const std::string& value, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(value.c_str(), &end, 10);
  // K/M/G suffixes (powers of 1024): byte sizes are the common case. A scaled value
  // that does not fit is refused like any other out of range.
  bool overflow = false;
  const char unit = end ? static_cast<char>(std::toupper(static_cast<unsigned char>(*end))) : 0;
  if (unit == 'K' || unit == 'M' || unit == 'G') {
    overflow = __builtin_mul_overflow(x, 1LL << (unit == 'K' ? 10 : unit == 'M' ? 20 : 30), &x);
    ++end;
  }
  if (errno || overflow || end == value.c_str() || *end != '\0' || x < lo || x > hi)
    throw InvalidArgument(std::string(name) + "=" + value + " is not an integer in " +
                          range(static_cast<double>(lo), static_cast<double>(hi)));
  return x;
}

long long integer(const char* name) {
  const Setting& s = find(name);
  auto v = raw(name);
  if (!v) return static_cast<long long>(s.fallback);
  return parse_integer(name, *v, static_cast<long long>(s.lo), static_cast<long long>(s.hi));
}

double number(const char* name) {
  const Setting& s = find(name);
  auto v = raw(name);
  if (!v) return s.fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !(x >= s.lo && x <= s.hi))
    throw InvalidArgument(std::string(name) + "=" + *v + " is not a number in " + range(s.lo, s.hi));
  return x;
}

std::string choose(std::string_view name, std::string_view value, std::string_view choices) {
  auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (size_t at = 0;;) {
    const size_t bar = choices.find('|', at);
    const std::string_view choice = choices.substr(at, bar == std::string_view::npos ? bar : bar - at);
    if (same(choice, value)) return std::string(choice);
    if (bar == std::string_view::npos) break;
    at = bar + 1;
  }
  throw InvalidArgument(std::string(name) + "=" + std::string(value) + " is not one of: " +
                        choices_list(choices));
}

std::string text(const char* name) {
  const Setting& s = find(name);
  auto v = raw(name);
  if (!v) return "";
  return s.choices ? choose(name, *v, s.choices) : *v;
}

void check_all() {
  for (const Setting& s : kTable) {
    if (!is_set(s.name)) continue;
    if (s.type == Type::integer) (void)integer(s.name);
    else if (s.type == Type::number) (void)number(s.name);
    else (void)text(s.name);
  }
}

std::string closest(std::string_view unknown) {
  const Setting* best = &kTable[0];
  size_t best_d = SIZE_MAX;
  for (const Setting& s : kTable) {
    size_t d = edit_distance(unknown, s.name);
    if (d < best_d) best_d = d, best = &s;
  }
  return best->name;
}

}  // namespace settings

}  // namespace strata
