// One choice: on each cluster of a grid, the plan a communicator chooses (its creation's
// hierarchy from the bootstrap table and settings, then CommState's choice) and the one
// strata-sim replays are the same, for every collective, size, memory kind and forced
// algorithm tried. The communicator's side runs the library's own functions on what the
// cluster's ranks would tell it: their hosts, machines and CPUs in the bootstrap table,
// and STRATA_HIERARCHY, STRATA_LINK_MODEL and STRATA_ALGO in the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "core/comm_state.hpp"
#include "ground/reduce.hpp"
#include "simulate.hpp"

namespace strata::sim {
namespace {

void set_env(const char* name, const std::string& value) {
  if (value.empty()) ::unsetenv(name);
  else ::setenv(name, value.c_str(), 1);
}

// The bootstrap table the cluster's ranks would send the root.
std::vector<bootstrap::RankInfo> table_of(const LibraryInputs& in) {
  std::vector<bootstrap::RankInfo> table(in.hosts.size());
  for (size_t r = 0; r < table.size(); ++r) {
    bootstrap::RankInfo& info = table[r];
    std::snprintf(info.host, sizeof info.host, "%s", in.hosts[r].c_str());
    std::snprintf(info.machine, sizeof info.machine, "%s", in.cpus[r].machine.c_str());
    for (size_t w = 0; w < in.cpus[r].mask.size(); ++w) info.cpus[w] = in.cpus[r].mask[w];
  }
  return table;
}

// What the communicator of rank 0 would hold and choose.
struct Communicator {
  Hierarchy hier;
  Config cfg;
  std::vector<bootstrap::RankInfo> table;
};

Communicator communicator_on(const Cluster& c, const std::string& forced) {
  const LibraryInputs in = c.library_inputs();
  set_env("STRATA_HIERARCHY", in.hierarchy);
  set_env("STRATA_LINK_MODEL", in.link_model);
  set_env("STRATA_ALGO", forced);
  Communicator comm;
  comm.table = table_of(in);
  comm.hier = tuner_view(comm.table, hierarchy_of(comm.table, parse_hierarchy_spec(settings::text("STRATA_HIERARCHY"))));
  comm.cfg = Config::from_env();
  return comm;
}

void expect_same_hierarchy(const Hierarchy& lib, const Hierarchy& sim, const std::string& where) {
  ASSERT_EQ(lib.nranks, sim.nranks) << where;
  ASSERT_EQ(lib.levels.size(), sim.levels.size()) << where;
  for (size_t i = 0; i < lib.levels.size(); ++i) {
    EXPECT_EQ(lib.levels[i].name, sim.levels[i].name) << where;
    EXPECT_EQ(lib.levels[i].group, sim.levels[i].group) << where << " level " << i;
    EXPECT_EQ(lib.levels[i].link.latency_s, sim.levels[i].link.latency_s) << where << " level " << i;
    EXPECT_EQ(lib.levels[i].link.bandwidth_Bps, sim.levels[i].link.bandwidth_Bps) << where << " level " << i;
    EXPECT_EQ(lib.levels[i].link.stream_Bps, sim.levels[i].link.stream_Bps) << where << " level " << i;
  }
  EXPECT_EQ(lib.top.latency_s, sim.top.latency_s) << where;
  EXPECT_EQ(lib.top.bandwidth_Bps, sim.top.bandwidth_Bps) << where;
  EXPECT_EQ(lib.device.latency_s, sim.device.latency_s) << where;
  EXPECT_EQ(lib.device.bandwidth_Bps, sim.device.bandwidth_Bps) << where;
  EXPECT_EQ(lib.oversubscribed, sim.oversubscribed) << where;
}

Cluster cluster_file(const std::string& path) { return load_cluster(path); }

// The grid's clusters: the example files, the DGX-2 pod, and what the library is told
// varied (its defaults, nodes only, figures given by hand, an oversubscribed machine,
// two ranks on one host).
std::vector<Cluster> clusters() {
  const std::string dir = STRATA_SIM_CLUSTERS, tests = STRATA_SIM_TESTS;
  std::vector<Cluster> out;
  for (const char* f : {"superpod-1k.cluster", "two-islands.cluster", "emulated-4x2-1gbit.cluster"})
    out.push_back(cluster_file(dir + "/" + f));
  out.push_back(cluster_file(tests + "/data/dgx2-pod.cluster"));
  const std::string fabric = "level node size 8 bandwidth 450GB/s latency 3us\n"
                             "level su size 4 bandwidth 400Gbit/s latency 6us links 8\n"
                             "level spine size 4 bandwidth 400Gbit/s latency 8us oversubscription 2\n";
  out.push_back(parse_cluster("name defaults\n" + fabric, "defaults"));
  out.push_back(parse_cluster("name nodes\nhierarchy nodes\nlink_model cluster\nmemory device\n" + fabric, "nodes"));
  out.push_back(parse_cluster("name by-hand\nlink_model node:2us:100GB,su:10us:20GB,top:20us:5GB\n" + fabric, "by-hand"));
  out.push_back(parse_cluster("name shared-cpus\noversubscribed\nlevel host size 3 bandwidth 3GB/s latency 10us forwards\n"
                              "level net size 3 bandwidth 1gbit latency 35us\nlink_model top:50us:118750000B\n",
                              "shared-cpus"));
  out.push_back(parse_cluster("name pair\nlevel host size 2 bandwidth 3GB/s latency 1us forwards\n", "pair"));
  return out;
}

TEST(OneChoice, TheCommunicatorAndTheSimulatorChooseAlike) {
  const Collective colls[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                              Collective::broadcast,  Collective::reduce,         Collective::all_to_all};
  const size_t sizes[] = {8, 4096, 256 << 10, 16 << 20, size_t(1) << 30};  // bytes of the API's count
  int compared = 0, hierarchical = 0, forced_ring = 0;
  for (const Cluster& file : clusters())
    for (const char* forced : {"", "ring", "hierarchical"})
      for (MemoryKind memory : {MemoryKind::host, MemoryKind::device}) {
        Cluster c = file;
        c.memory = memory;
        const Model m(c);
        const Communicator comm = communicator_on(c, forced);
        const std::string where = c.name + " STRATA_ALGO=" + forced + " " + name(memory);
        expect_same_hierarchy(comm.hier, m.hierarchy, where);
        if (HasFailure()) return;
        for (Collective coll : colls)
          for (size_t bytes : sizes)
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
              const SimCall sc{coll, bytes / 4, DataType::float32, op, coll == Collective::broadcast ? 1 : 0, false};
              Call call;
              call.coll = coll, call.count = sc.count, call.type = sc.type, call.op = op, call.root = sc.root;
              call.memory = memory;
              // Two ranks' links forward where both are on one host and the buffers host memory
              // (shared memory's link forwards, docs/transports.md; Engine::links_forward).
              const bool forward = c.nranks() == 2 && !has_finalize(op) && memory == MemoryKind::host &&
                                   std::string(comm.table[0].host) == comm.table[1].host;
              const PlanChoice lib = plan_choice(comm.hier, comm.cfg, 0, c.nranks(), call, forward);
              const std::string what = where + " " + name(coll) + " " + std::to_string(bytes) + " B " + name(op);
              std::optional<Algo> force;
              for (Algo a : kAllAlgos)
                if (std::string(forced) == name(a) && supports(a, coll)) force = a;
              const PlanChoice sim = choose(m.cluster, m.hierarchy, sc, force);
              EXPECT_EQ(name(lib.algo), std::string(name(sim.algo))) << what;
              EXPECT_EQ(lib.forced, sim.forced) << what;
              EXPECT_EQ(lib.predicted_s, sim.predicted_s) << what;
              EXPECT_EQ(lib.args.chunk_count, sim.args.chunk_count) << what;
              EXPECT_EQ(lib.args.count, sim.args.count) << what;
              EXPECT_EQ(lib.args.elem_size, sim.args.elem_size) << what;
              EXPECT_EQ(lib.args.root, sim.args.root) << what;
              EXPECT_EQ(lib.args.nranks, sim.args.nranks) << what;
              EXPECT_EQ(lib.args.in_place, sim.args.in_place) << what;
              EXPECT_EQ(lib.args.forward, sim.args.forward) << what;
              EXPECT_EQ(lib.args.memory, sim.args.memory) << what;
              if (HasFailure()) return;
              ++compared;
              hierarchical += !*forced && lib.algo == Algo::hierarchical;
              forced_ring += lib.forced && lib.algo == Algo::ring;
            }
      }
  // The grid reaches the choices it is for: the tuner's own, hierarchical among them, and forced ones.
  EXPECT_EQ(compared, 9 * 3 * 2 * 6 * 5 * 2);
  EXPECT_GT(hierarchical, 0);
  EXPECT_GT(forced_ring, 0);
}

}  // namespace
}  // namespace strata::sim
