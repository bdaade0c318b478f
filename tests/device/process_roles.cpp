#include "process_roles.hpp"

#include <cstdlib>
#include <cstring>

#include "device_test.hpp"
#include "link_ranks.hpp"

namespace strata_test {

namespace {

struct Role {
  const char* flag;
  int (*run)(int, char**);
};
const Role kRoles[] = {{"--ipc-peer", ipc_peer_role}, {"--no-backend", no_backend_role}, {"--link-rank", link_rank_role},
                       {"--held-stream", held_stream_role}, {"--implicit-sync-hang", implicit_sync_hang_role}};

}  // namespace

bool is_role(const char* flag) {
  for (const Role& r : kRoles)
    if (std::strcmp(flag, r.flag) == 0) return true;
  return false;
}

int run_role(int argc, char** argv) {
  for (const Role& r : kRoles)
    if (std::strcmp(argv[1], r.flag) == 0) return r.run(argc, argv);
  return 2;
}

SpawnSpec role_spec(const std::string& flag, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> all{{"STRATA_DEVICE", dev().name()}};
  if (const char* d = std::getenv("STRATA_EMULATED_DELAY_US")) all["STRATA_EMULATED_DELAY_US"] = d;
  for (const auto& [k, v] : env) all[k] = v;
  std::vector<std::string> argv{"/proc/self/exe", flag};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = make_env(all);
  spec.merge_stderr = true;
  return spec;
}

Process start_role(const std::string& flag, const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env) {
  return Process(role_spec(flag, args, env));
}

}  // namespace strata_test
