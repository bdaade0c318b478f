#include "core/bootstrap/launch_env.hpp"

#include <cstdlib>
#include <limits>

#include "ground/settings.hpp"
#include "strata/error.hpp"

namespace strata::bootstrap {

namespace {

// The variables each launcher gives every rank, innermost launcher first: a process
// started by strata-run inside a Slurm job, by torchrun under srun, or by mpirun inside
// an sbatch script sees the outer launcher's variables too, and the inner one is the one
// that started it. Slurm's size and local size need more than one variable (below).
struct Vars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};
constexpr Vars kLaunchers[] = {
    {"strata-run", "STRATA_RANK", "STRATA_WORLD_SIZE", "STRATA_LOCAL_RANK", "STRATA_LOCAL_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr},
    {"pmix", "PMIX_RANK", nullptr, nullptr, nullptr},
};

// Slurm roots listen below Linux's default ephemeral range (32768-60999), so a port the
// kernel handed to some client is never the one derived here.
constexpr int kSlurmPortBase = 12000, kSlurmPortSpan = 20000;

long long parse_int(const Env& env, const char* name, const std::string& who, long long lo, long long hi) {
  auto v = env(name);
  if (!v) throw InvalidArgument(who + ": " + name + " must be set");
  try {
    return settings::parse_integer(name, *v, lo, hi);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(who + ": " + e.what());
  }
}

constexpr long long kMaxRanks = 1 << 24;

std::string host_port(std::string host, long long port) {
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";  // IPv6 literal
  return host + ":" + std::to_string(port);
}

// STRATA_ROOT_PORT, when set and not 0, replaces the port derived from a launcher's variables.
std::optional<long long> root_port_setting(const Env& env) {
  if (!env("STRATA_ROOT_PORT")) return std::nullopt;
  const auto& s = settings::find("STRATA_ROOT_PORT");
  long long port = parse_int(env, "STRATA_ROOT_PORT", "STRATA_ROOT_PORT", static_cast<long long>(s.lo),
                             static_cast<long long>(s.hi));
  if (port == 0) return std::nullopt;
  return port;
}

// The ranks on this node under Slurm: the step's tasks per node, at this node's index.
int slurm_local_size(const Env& env, const std::string& who) {
  const char* list_name = env("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  auto list = env(list_name);
  if (!list) throw InvalidArgument(who + ": SLURM_STEP_TASKS_PER_NODE must be set");
  std::vector<int> per_node = expand_tasks_per_node(*list);
  long long node = parse_int(env, "SLURM_NODEID", who, 0, static_cast<long long>(per_node.size()) - 1);
  return per_node[static_cast<size_t>(node)];
}

std::string temp_dir(const Env& env) {
  auto t = env("TMPDIR");
  return t ? *t : "/tmp";
}

std::string file_safe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  return s;
}

}  // namespace

Env process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
}

std::string first_host(const std::string& hostlist) {
  // The first entry ends at the first comma outside brackets; each bracket group in it
  // contributes its first value, zero padding kept ("n[007-009]" -> "n007").
  std::string host;
  int depth = 0;
  bool skipping = false;  // inside a bracket, past its first value
  for (char c : hostlist) {
    if (c == '[') {
      depth++;
      skipping = false;
    } else if (c == ']') {
      depth--;
    } else if (depth == 0) {
      if (c == ',') break;
      host += c;
    } else if (c == ',' || c == '-') {
      skipping = true;
    } else if (!skipping) {
      host += c;
    }
    if (depth < 0 || depth > 1) throw InvalidArgument("malformed Slurm host list '" + hostlist + "'");
  }
  if (depth != 0 || host.empty()) throw InvalidArgument("malformed Slurm host list '" + hostlist + "'");
  return host;
}

std::vector<int> expand_tasks_per_node(const std::string& list) {
  std::vector<int> out;
  size_t i = 0;
  auto number = [&](void) {
    size_t start = i;
    while (i < list.size() && std::isdigit(static_cast<unsigned char>(list[i]))) i++;
    if (start == i || i - start > 7) throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
    return std::stoi(list.substr(start, i - start));
  };
  while (i < list.size()) {
    int tasks = number(), repeat = 1;
    if (i < list.size() && list[i] == '(') {
      if (list.compare(i, 2, "(x") != 0) throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
      i += 2;
      repeat = number();
      if (i >= list.size() || list[i] != ')') throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
      i++;
    }
    if (out.size() + static_cast<size_t>(repeat) > static_cast<size_t>(kMaxRanks))
      throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
    out.insert(out.end(), static_cast<size_t>(repeat), tasks);
    if (i < list.size() && (list[i++] != ',' || i == list.size()))
      throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
  }
  if (out.empty()) throw InvalidArgument("malformed Slurm tasks-per-node list '" + list + "'");
  return out;
}

std::string Launch::describe() const {
  std::string where = rendezvous == Rendezvous::pmix   ? "PMIx key-value store"
                      : rendezvous == Rendezvous::file ? "file " + root
                                                       : root;
  std::string local = local_size > 0 ? std::to_string(local_rank) + " of " + std::to_string(local_size) : "?";
  return "launcher " + launcher + ": rank " + std::to_string(rank) + " of " +
         (size > 0 ? std::to_string(size) : std::string("? (from PMIx)")) + ", local " + local +
         (job_id.empty() ? "" : ", job " + job_id) + "; root via " + where + " (" + root_from + ")";
}

std::optional<Launch> find_launch(const Env& env, bool pmix_built) {
  const Vars* vars = nullptr;
  for (const Vars& v : kLaunchers)
    if (env(v.rank)) {
      vars = &v;
      break;
    }
  if (!vars) return std::nullopt;

  Launch l;
  l.launcher = vars->launcher;
  const std::string who = l.launcher + " launch";
  const bool slurm = l.launcher == "slurm", torchrun = l.launcher == "torchrun";

  // Rank, size and the ranks on this host.
  if (vars->size) {
    const char* size_name = slurm && !env(vars->size) ? "SLURM_NTASKS" : vars->size;
    l.size = static_cast<int>(parse_int(env, size_name, who, 1, kMaxRanks));
  }
  l.rank = static_cast<int>(parse_int(env, vars->rank, who, 0, l.size > 0 ? l.size - 1 : kMaxRanks - 1));
  l.local_rank = -1;
  l.local_size = 0;  // unknown unless the launcher says
  if (vars->local_rank && env(vars->local_rank)) {
    l.local_size = slurm ? slurm_local_size(env, who)
                         : (vars->local_size ? static_cast<int>(parse_int(env, vars->local_size, who, 1, l.size)) : 0);
    if (l.local_size > 0)
      l.local_rank = static_cast<int>(parse_int(env, vars->local_rank, who, 0, l.local_size - 1));
  }

  // The job's identity: the root file's name and the derived secret depend on it.
  if (slurm) {
    auto job = env("SLURM_JOB_ID"), step = env("SLURM_STEP_ID");
    if (!job) throw InvalidArgument(who + ": SLURM_JOB_ID must be set");
    l.job_id = *job + "." + (step ? *step : "0");
  } else if (l.launcher == "mpirun") {
    if (auto j = env("OMPI_MCA_ess_base_jobid")) l.job_id = *j;
    else if (auto ns = env("PMIX_NAMESPACE")) l.job_id = *ns;
  } else if (l.launcher == "pmix") {
    if (auto ns = env("PMIX_NAMESPACE")) l.job_id = *ns;
  }

  // Where rank 0's root is: what the user set first, then what the launcher provides.
  auto port_override = root_port_setting(env);
  if (auto root = env("STRATA_ROOT")) {
    l.root = *root;
    l.root_from = "STRATA_ROOT";
  } else if (auto file = env("STRATA_ROOT_FILE")) {
    l.rendezvous = Rendezvous::file;
    l.root = *file;
    l.root_from = "STRATA_ROOT_FILE";
  } else if (torchrun) {
    auto addr = env("MASTER_ADDR");
    if (!addr) throw InvalidArgument(who + ": MASTER_ADDR must be set (or STRATA_ROOT)");
    long long master_port = parse_int(env, "MASTER_PORT", who, 1, 65534);
    // torch's own store listens on MASTER_PORT; the next port is Strata's.
    l.root = host_port(*addr, port_override.value_or(master_port + 1));
    l.root_from = port_override ? "MASTER_ADDR and STRATA_ROOT_PORT" : "MASTER_ADDR and MASTER_PORT+1";
    l.derived = true;
    auto run = env("TORCHELASTIC_RUN_ID");
    l.job_id = (run ? *run : std::string("none")) + "@" + host_port(*addr, master_port);
  } else if (pmix_built && env("PMIX_NAMESPACE")) {
    l.rendezvous = Rendezvous::pmix;
    l.root_from = "PMIx from " + l.launcher;
  } else if (slurm) {
    auto nodes = env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
    if (!nodes) throw InvalidArgument(who + ": SLURM_STEP_NODELIST must be set (or STRATA_ROOT)");
    long long job = parse_int(env, "SLURM_JOB_ID", who, 0, std::numeric_limits<long long>::max() / 128);
    long long step = env("SLURM_STEP_ID") ? parse_int(env, "SLURM_STEP_ID", who, 0, 1 << 30) : 0;
    l.root = host_port(first_host(*nodes), port_override.value_or(kSlurmPortBase + (job * 64 + step) % kSlurmPortSpan));
    l.root_from = port_override ? "the step's first node and STRATA_ROOT_PORT"
                                : "the step's first node and a port from the job and step ids";
    l.derived = true;
  } else if (l.size > 0 && l.local_size == l.size && !l.job_id.empty()) {
    // Every rank on this host: a file in the temporary directory, named by the job.
    l.rendezvous = Rendezvous::file;
    l.root = temp_dir(env) + "/strata-root-" + file_safe(l.launcher + "-" + l.job_id);
    l.root_from = "all ranks on this host";
  } else {
    throw InvalidArgument(
        "init_from_env: started by " + l.launcher + ", but rank 0's address cannot be found: " +
        (pmix_built ? std::string("no PMIx server is reachable (PMIX_NAMESPACE is unset)")
                    : std::string("this libstrata was built without PMIx")) +
        "; set STRATA_ROOT_FILE to a path on a filesystem all ranks share, or STRATA_ROOT=host:port");
  }
  if (l.launcher == "pmix" && l.rendezvous != Rendezvous::pmix)
    throw InvalidArgument("init_from_env: only PMIX_RANK is set, and without PMIx the job's size is unknown");
  return l;
}

}  // namespace strata::bootstrap
