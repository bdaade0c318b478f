// Launcher environments (core/bootstrap/launch_env): find_launch over a fuzzed
// environment, and Slurm's compressed lists (first_host, expand_tasks_per_node). The
// input is lines NAME=VALUE; its first byte says whether PMIx was built in.
#include <map>
#include <sstream>

#include "core/bootstrap/launch_env.hpp"
#include "strata/error.hpp"
#include "tests/fuzz/fuzz.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const bool pmix_built = in.byte() & 1;
  std::map<std::string, std::string> vars;
  std::istringstream lines(in.rest());
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  bootstrap::Env env = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  try {
    std::optional<bootstrap::Launch> l = bootstrap::find_launch(env, pmix_built);
    if (l) {
      FUZZ_CHECK(!l->launcher.empty());
      FUZZ_CHECK(l->rank >= 0 && l->size >= 0 && (l->size == 0 || l->rank < l->size));
      FUZZ_CHECK(l->local_size >= 0 && (l->local_size == 0 || (l->local_rank >= 0 && l->local_rank < l->local_size)));
      FUZZ_CHECK(l->rendezvous == bootstrap::Rendezvous::pmix || !l->root.empty());
      (void)l->describe();
    }
  } catch (const InvalidArgument&) {
  }
  // The lists alone, from every value (Slurm hands them over as they are).
  for (const auto& [name, value] : vars) {
    try {
      FUZZ_CHECK(!bootstrap::first_host(value).empty());
    } catch (const InvalidArgument&) {
    }
    try {
      std::vector<int> tasks = bootstrap::expand_tasks_per_node(value);
      FUZZ_CHECK(!tasks.empty() && tasks.size() <= (1u << 24));
      for (int t : tasks) FUZZ_CHECK(t >= 0);
    } catch (const InvalidArgument&) {
    }
  }
  return 0;
}
