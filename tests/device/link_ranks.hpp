// Link-level tests of the device links (transports/ipc, transports/staging): a job of n
// processes, each this binary in the --link-rank role, which makes the real mesh
// (core/mesh.hpp: offers, the transport table's choice, every row's setup) from a rank
// table the test writes, with the host identities the test picks (one host: ipc between
// the ranks; two: staging over tcp), and then runs one named scenario on its links. No
// engine runs: a scenario posts transfers and drives the links itself.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "tests/common/process.hpp"

namespace strata_test {

// What a scenario gets: its rank and the mesh's links.
struct LinkRank {
  int rank = 0, nranks = 0;
  strata::Mesh mesh;
  strata::Link& device(int peer);  // the device link to `peer` (throws when there is none)
};

using Scenario = std::function<void(LinkRank&)>;  // throws (any std::exception) to fail
// Registers a scenario by name, for the rank processes to find (at static initialisation).
bool add_scenario(const std::string& name, Scenario run);

// Per rank: its host identity and settings of its own (added to `env` of run_job).
struct RankSpec {
  std::string host;
  std::map<std::string, std::string> env = {};
};

// Starts one process per rank running `scenario` and collects them (in rank order) within
// `deadline_s`. `meanwhile`, if given, runs once they are started (e.g. to send signals).
std::vector<ProcResult> run_job(const std::string& scenario, const std::vector<RankSpec>& ranks,
                                const std::map<std::string, std::string>& env = {},
                                const std::function<void(std::vector<Process>&)>& meanwhile = {}, double deadline_s = 90);

// Progresses `links` until every one is idle; throws naming the scenario's state when
// nothing is left moving within `seconds`.
void drive(const std::vector<strata::Link*>& links, double seconds = 60);

// The role's entry point (process_roles.cpp).
int link_rank_role(int argc, char** argv);

}  // namespace strata_test
