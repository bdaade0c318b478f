// Link-level tests of the device links (transports/ipc, transports/staging): a job of n
// processes, each this binary in the --link-rank role, which connects every pair with the
// real connector (core/connector.hpp: offers, the transport table's choice, every row's
// setup) from a rank table the test writes, with the host identities the test picks (one host: ipc between
// the ranks; two: staging over tcp), and then runs one named scenario on its links. No
// engine runs: a scenario posts transfers and drives the links itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <memory>

#include "core/connector.hpp"
#include "tests/common/process.hpp"

namespace strata_test {

// What a scenario gets: its rank and the connector's links (every pair connected).
struct LinkRank {
  int rank = 0, nranks = 0;
  std::vector<strata::bootstrap::RankInfo> table;
  strata::Config cfg;
  std::unique_ptr<strata::ControlChannel> control;
  std::unique_ptr<strata::Connector> connector;
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

// What scenarios share: failing with a message (callers that check per byte build it only
// on failure), the peers and their device links, and the bytes rank `from` sends rank
// `to` as byte i of its transfer k.
[[noreturn]] void fail(const std::string& what);
std::vector<int> peers_of(const LinkRank& me);
std::vector<strata::Link*> links_of(LinkRank& me);
inline uint8_t pattern(int from, int to, size_t k, size_t i) {
  return static_cast<uint8_t>(from * 97 + to * 13 + k * 31 + i * 7 + (i >> 8));
}

// Progresses `links` until every one is idle; throws naming the scenario's state when
// nothing is left moving within `seconds`.
void drive(const std::vector<strata::Link*>& links, double seconds = 60);

// The role's entry point (process_roles.cpp).
int link_rank_role(int argc, char** argv);

}  // namespace strata_test
