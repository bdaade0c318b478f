// Which launcher started this process, read from the variables it sets: this rank, the
// job's size, the ranks on this host, and how rank 0's bootstrap root is found by the
// others. Only reads variables, so tests give it any environment (docs/launcher.md has
// the order and the reasons).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace strata::bootstrap {

// Looks a variable up: nullopt when unset or empty.
using Env = std::function<std::optional<std::string>(const char* name)>;
Env process_env();

// How the other ranks learn where rank 0's root listens.
enum class Rendezvous {
  address,  // a host:port every rank knows (STRATA_ROOT, or derived from the launcher)
  file,     // rank 0 writes its unique id to a file the others read
  pmix,     // rank 0 puts its unique id in the launcher's PMIx key-value store
};

struct Launch {
  std::string launcher;  // "strata-run", "torchrun", "mpirun", "slurm" or "pmix"
  int rank = 0;
  int size = 0;  // 0: only PMIx knows it (a PMIx launcher that sets nothing else)
  int local_rank = 0, local_size = 1;
  std::string job_id;  // the launcher's job (and step) id; "" if it gives none

  Rendezvous rendezvous = Rendezvous::address;
  std::string root;       // address: "host:port"; file: the file's path
  std::string root_from;  // what the root came from, for the log and errors
  // address: true when the root's port is derived from the launcher (not STRATA_ROOT),
  // so the secret is derived from the job id as well.
  bool derived = false;

  std::string describe() const;  // one line for STRATA_DEBUG=INFO
};

// The launch this environment describes, or nullopt when no launcher's variables are set.
// `pmix_built`: this libstrata can use PMIx. Throws InvalidArgument when a launcher's
// variables are partial or malformed, or rank 0's root cannot be found; the message
// names the variables.
std::optional<Launch> find_launch(const Env& env, bool pmix_built);

// Slurm's compressed lists, exposed for the tests.
// The first host of a hostlist: "gpu[07-09,12],cpu1" -> "gpu07".
std::string first_host(const std::string& hostlist);
// Tasks per node: "2(x3),1" -> {2, 2, 2, 1}.
std::vector<int> expand_tasks_per_node(const std::string& list);

}  // namespace strata::bootstrap
