// A modelled cluster: nested levels of rank groups (GPU -> node -> leaf -> spine ...),
// each with the links that join its sub-groups. Read from the text format of
// docs/simulator.md; every error names the file and line.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/hierarchy.hpp"
#include "ground/memory_kind.hpp"

namespace strata::sim {

// A malformed cluster description: what() is "FILE:LINE: what is wrong".
class ClusterError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LevelDesc {
  std::string name;
  int size = 0;              // level 0: ranks per group; above: groups of the level below per group
  double bandwidth_Bps = 0;  // one link, each direction (payload: efficiency applied)
  double latency_s = 0;      // a message between ranks whose smallest common group is of this level
  // Level 0: every rank has a port of `bandwidth` into its group's fabric (NVSwitch, shared
  // memory). Above: each group of the level below has `links` links up into this level;
  // or, from level 2, `oversubscription` X: its uplink carries 1/X of what its sub-groups'
  // uplinks bring in.
  int links = 1;
  double oversubscription = 0;  // 0: not given
  // A token bucket on every link of this level (tc's tbf: the emulated cluster): with
  // tokens left a link runs at `peak`; `burst` bytes of them, refilled at `bandwidth`.
  double burst_bytes = 0;
  double peak_Bps = 0;
  // Bytes a direction between two ranks of this level holds between the sender and the
  // wire (socket buffers, a FIFO): a send completes once no more than this much of it
  // remains to be sent. 0: when its last byte has left.
  double buffer_bytes = 0;
  // What a rank spends on each message it sends to a rank of this level (posting it, LogP's
  // o): a round's sends leave one such time after another. 0: nothing.
  double overhead_s = 0;
  bool forwards = false;  // level 0: links forward reductions (shared memory: plans may use recv_reduce_send)
  int line = 0;           // where it was declared, for messages
};

// What a job's ranks on this cluster tell the library, as on a real job: each rank's host
// (its node) and machine with its CPUs (the bootstrap table), and the settings that shape
// its hierarchy. The communicator turns these into its tuner's view (hierarchy_of and
// tuner_view, src/core/comm_create.cpp); strata-sim does the same (Cluster::hierarchy).
struct LibraryInputs {
  std::vector<std::string> hosts;  // per rank
  std::vector<RankCpus> cpus;      // per rank: its machine and the CPUs it may use
  std::string hierarchy;           // STRATA_HIERARCHY
  std::string link_model;          // STRATA_LINK_MODEL
};

struct Cluster {
  std::string name;    // `name` line, else the file name
  std::string source;  // the file, for messages
  std::vector<LevelDesc> levels;  // innermost first; the last one is the whole cluster
  // One rank's local passes (the plan's copy, reduce and finalize steps), bytes per second.
  double copy_Bps = 6e9;
  double reduce_Bps = 4e9;
  // Messages up to this size are sent before their receive is posted (socket buffers,
  // FIFOs); larger ones wait for it.
  double eager_bytes = 4 << 20;
  // More ranks than CPUs on a machine (the library's Hierarchy::oversubscribed).
  bool oversubscribed = false;
  // What the library is told, as on a real job: which levels its hierarchy has (`all`:
  // every level below the whole cluster, as STRATA_HIERARCHY naming them would give;
  // `nodes`: nodes only, the library's default), and the link models its tuner uses
  // (STRATA_LINK_MODEL's syntax; empty: the library's defaults; `cluster`: this file's
  // figures, as if STRATA_LINK_MODEL gave them).
  bool hierarchy_all = true;
  std::string link_model;
  int link_model_line = 0;
  int ranks_line = 0;  // the `ranks` line, 0 if none
  // Where the calls' buffers live (`memory host|device`): the tuner models device buffers
  // inside a node by the device link (STRATA_LINK_MODEL's "device") and device passes.
  MemoryKind memory = MemoryKind::host;

  int nranks() const;
  // Group of `rank` at level i: ranks of one group are consecutive.
  int group_of(int rank, size_t level) const { return rank / ranks_per_group(level); }
  int ranks_per_group(size_t level) const;
  // The smallest shift of every rank that maps the fabric onto itself: the ranks of a group
  // of the level below the outermost (the outermost level's groups are all alike), or 1.
  int rotation_period() const { return levels.size() > 1 ? ranks_per_group(levels.size() - 2) : 1; }
  // The smallest level whose group holds both ranks.
  size_t common_level(int a, int b) const;
  // Bytes per second one group of level i-1 can send up into level i (i >= 1): its links,
  // or what its sub-groups bring in / oversubscription.
  double uplink_Bps(size_t level) const;
  // What the library is told here (see hierarchy_all and link_model). With `link_model
  // cluster`, STRATA_LINK_MODEL gives each level the figures of a message inside one of
  // its groups: latency; bandwidth per rank at level 0 (and for device buffers), per node
  // above (what a node's ranks share); "top" the outermost level's.
  LibraryInputs library_inputs() const;
  // The hierarchy the library's algorithms and tuner see: library_inputs() turned into a
  // hierarchy as a communicator's creation does.
  Hierarchy hierarchy() const;
  std::string describe() const;
};

Cluster parse_cluster(const std::string& text, const std::string& source);
Cluster load_cluster(const std::string& path);  // ClusterError when unreadable too

// The total rank count changed to `nranks` by resizing the outermost level; ClusterError
// naming that level's line when the levels below do not divide it.
void resize_cluster(Cluster& c, long nranks);

// "450GB/s", "400Gbit/s", "1gbit"; "2us", "0.5ms"; "4MiB", "500KB", "65536".
// nullopt-like: return false on anything else.
bool parse_rate(const std::string& s, double* bytes_per_second);
bool parse_time(const std::string& s, double* seconds);
bool parse_bytes(const std::string& s, double* bytes);

}  // namespace strata::sim
