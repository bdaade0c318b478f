// The hierarchy a communicator sees: levels of rank groups, innermost first (node, then
// optional rack/rail, then island), each with a link model for the links that join
// groups of the level below inside one of its groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LinkModel {
  double latency_s;      // alpha: per message
  double bandwidth_Bps;  // 1/beta: per byte, both directions busy (a ring's or exchange's rounds)
  // One direction alone, pipelined (a chain's or tree's stream: broadcast, reduce); 0: the
  // same as bandwidth_Bps (what a STRATA_LINK_MODEL entry gives).
  double stream_Bps = 0;
  // What a rank spends on each message it sends over these links (posting it: the
  // software's part, LogP's o), one message after another; < 0: not told, and the tuner
  // charges a message's whole latency for each of a rank's messages in a round (measured so
  // on the emulated cluster, docs/benchmarks.md, "Measured choices").
  double overhead_s = -1;
  double one_way_Bps() const { return stream_Bps > 0 ? stream_Bps : bandwidth_Bps; }
};

// Device buffers of one node (the IPC link), unless STRATA_LINK_MODEL's "device" says
// otherwise: about a copy engine's latency as the host sees it (a task queued, its event
// polled) and a copy rate between device buffers. Not yet measured on a GPU (docs/gpu.md).
inline constexpr LinkModel kDefaultDeviceLink{10e-6, 150e9};

struct Level {
  std::string name;        // "node", "rack", "island", ...
  std::vector<int> group;  // group index of every rank at this level (0..ngroups-1, by first rank)
  int ngroups = 0;
  LinkModel link;          // links inside a group of this level (between its sub-groups)
};

struct Hierarchy {
  int nranks = 1;
  std::vector<Level> levels;  // levels[0] = node; groups of level i+1 are unions of level-i groups
  LinkModel top;              // links between the outermost groups
  // Links between device buffers of one node (the IPC link): STRATA_LINK_MODEL's "device";
  // the tuner uses it in place of the node level's for calls on device memory.
  LinkModel device = kDefaultDeviceLink;
  bool oversubscribed = false;  // some machine runs more ranks than it gives them CPUs

  // The ranks of rank r's group at level i, in rank order.
  std::vector<int> members(int level, int r) const;
  bool single_group() const { return levels.empty() || levels.back().ngroups == 1; }
  std::string describe() const;
};

// STRATA_HIERARCHY: "node:2,island:2" groups consecutive ranks into nodes of 2, and
// consecutive nodes into islands of 2 nodes. "node" may be left out ("island:2"): nodes
// then come from host identities. Empty: nodes from host identities only.
struct LevelSpec {
  std::string name;
  int size;  // ranks per node for level 0, else groups of the level below per group
};
std::vector<LevelSpec> parse_hierarchy_spec(const std::string& spec);

// Emulated node of `rank` when the spec sets node sizes, else -1.
int emulated_node(const std::vector<LevelSpec>& spec, int rank);

// The default link models, fitted on the 2-vCPU development VM (the figures each is fitted
// to: docs/benchmarks.md, "Measured choices"). Shared memory: a message's latency from a
// two-rank 8 B all_reduce (direct), and large copies at about half the single-core copy
// rate (data in, then out). Tcp between ranks of one host (STRATA_TRANSPORT=tcp): an 8 B
// all_reduce's latency and the rate at 1 MiB. One direction alone streams faster than the
// two-way rate, which predicted a 2-rank broadcast or reduce (the chain) too slow, on
// shared memory and over tcp (perf/scan): hence a one-way rate. A network between nodes:
// 10 Gbit/s.
inline constexpr LinkModel kShmLink{0.5e-6, 3e9, 12e9}, kHostTcpLink{5e-6, 2e9, 5e9}, kNetLink{30e-6, 1.25e9};

// Builds the hierarchy from each rank's host identity and the spec. Link models come from
// defaults (shared memory inside a node, or tcp when `node_over_tcp`; network above) or
// STRATA_LINK_MODEL ("node:1us:6GB,island:500us:0.125GB", names as levels, "top" for the
// outermost links, "device" for device buffers inside a node; a fourth field, a time, is
// the overhead per message: "top:8us:50GB:1us").
Hierarchy build_hierarchy(const std::vector<std::string>& hosts, const std::vector<LevelSpec>& spec,
                          const std::string& link_model_spec, bool node_over_tcp = false);

// The hierarchy of `members` (ranks of h, ascending) alone, numbered 0.. in that order:
// each keeps its groups and the levels their link models (Comm::shrink).
Hierarchy restrict_hierarchy(const Hierarchy& h, const std::vector<int>& members);

// One rank's CPUs: the machine it runs on and the CPUs it may run on (64 per word).
struct RankCpus {
  std::string machine;
  std::vector<uint64_t> mask;
};

// True when some machine runs more of these ranks than the CPUs they may use together
// (the union of their masks): ranks bound to separate cores are not oversubscribed.
bool oversubscribed(const std::vector<RankCpus>& ranks);

}  // namespace strata
