// The cluster format: what a file means, and errors that name the line.
#include <gtest/gtest.h>

#include <cmath>

#include "cluster.hpp"
#include "fabric.hpp"

namespace strata::sim {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_cluster(text, "c.cluster");
  } catch (const ClusterError& e) {
    return e.what();
  }
  return "";
}

TEST(Cluster, UnitsAndDerivedFigures) {
  double x;
  EXPECT_TRUE(parse_rate("450GB/s", &x) && x == 450e9);
  EXPECT_TRUE(parse_rate("400Gbit/s", &x) && x == 50e9);
  EXPECT_TRUE(parse_rate("1gbit", &x) && x == 125e6);
  EXPECT_TRUE(parse_rate("100Mbit", &x) && x == 12.5e6);
  EXPECT_FALSE(parse_rate("10mbps", &x)) << "tc's megabytes: refused, too easily misread";
  EXPECT_FALSE(parse_rate("-1GB/s", &x));
  EXPECT_FALSE(parse_rate("GB/s", &x));
  EXPECT_TRUE(parse_time("2.5us", &x) && std::abs(x - 2.5e-6) < 1e-18);
  EXPECT_FALSE(parse_time("2", &x)) << "a time needs its unit";
  EXPECT_TRUE(parse_bytes("4MiB", &x) && x == 4194304);
  EXPECT_TRUE(parse_bytes("65536", &x) && x == 65536);

  const Cluster c = parse_cluster(
      "name pod  # a comment\n"
      "level node  size 8   bandwidth 450GB/s latency 2us\n"
      "level leaf  size 4   bandwidth 400Gbit/s latency 5us links 8\n"
      "level spine size 2   bandwidth 400Gbit/s latency 7us oversubscription 2\n"
      "level wan   size 3   bandwidth 100Gbit/s latency 5ms links 1 efficiency 0.5\n",
      "x.cluster");
  EXPECT_EQ(c.name, "pod");
  EXPECT_EQ(c.nranks(), 8 * 4 * 2 * 3);
  EXPECT_EQ(c.uplink_Bps(1), 400e9);      // 8 x 50 GB/s per node
  EXPECT_EQ(c.uplink_Bps(2), 4 * 400e9 / 2);  // a leaf's nodes bring 1.6 TB/s, halved
  EXPECT_EQ(c.uplink_Bps(3), 6.25e9);     // one link, half of it payload
  EXPECT_EQ(c.common_level(0, 7), 0u);
  EXPECT_EQ(c.common_level(0, 8), 1u);
  EXPECT_EQ(c.common_level(0, 32), 2u);
  EXPECT_EQ(c.common_level(63, 64), 3u);

  // Paths: up the sender's uplinks, down the receiver's.
  const Fabric f(c);
  uint32_t path[FlowNetwork::kMaxPath];
  EXPECT_EQ(f.route(0, 1, path), 2);
  EXPECT_EQ(f.route(0, 64, path), 6);
  EXPECT_EQ(f.links()[path[0]].rate_Bps, 400e9);
  EXPECT_EQ(f.links()[path[4]].rate_Bps, 6.25e9);
  EXPECT_DOUBLE_EQ(f.latency(0, 64), 5e-3);
}

TEST(Cluster, TheLibrarySeesItsDefaultsUnlessTold) {
  const std::string levels = "level node size 4 bandwidth 100GB/s latency 1us\n"
                             "level leaf size 2 bandwidth 100Gbit/s latency 4us links 2\n"
                             "level top size 2 bandwidth 100Gbit/s latency 9us links 1\n";
  const Hierarchy plain = parse_cluster(levels, "c").hierarchy();
  ASSERT_EQ(plain.levels.size(), 2u);  // node and leaf: the whole cluster is not a level
  EXPECT_EQ(plain.levels[0].ngroups, 4);
  EXPECT_EQ(plain.levels[1].ngroups, 2);
  EXPECT_EQ(plain.levels[0].link.latency_s, kShmLink.latency_s) << "the library's default";
  const Hierarchy told = parse_cluster("link_model cluster\n" + levels, "c").hierarchy();
  EXPECT_EQ(told.levels[0].link.latency_s, 1e-6);
  EXPECT_EQ(told.levels[0].link.bandwidth_Bps, 100e9);
  EXPECT_EQ(told.levels[1].link.bandwidth_Bps, 25e9) << "a node's two 100 Gbit/s links";
  EXPECT_EQ(told.top.latency_s, 9e-6);
  EXPECT_EQ(told.top.bandwidth_Bps, 12.5e9 / 2) << "the leaf's one link, shared by its two nodes";
  const Hierarchy nodes = parse_cluster("hierarchy nodes\n" + levels, "c").hierarchy();
  EXPECT_EQ(nodes.levels.size(), 1u);
  const Hierarchy spec = parse_cluster("link_model node:3us:5GB,top:1ms:1GB\n" + levels, "c").hierarchy();
  EXPECT_EQ(spec.levels[0].link.latency_s, 3e-6);
  EXPECT_EQ(spec.top.bandwidth_Bps, 1e9);
}

TEST(Cluster, RanksSizeTheOutermostLevel) {
  const std::string levels = "level node size 8 bandwidth 1GB/s latency 1us\nlevel net bandwidth 1GB/s latency 1us\n";
  EXPECT_EQ(parse_cluster("ranks 64\n" + levels, "c").levels[1].size, 8);
  Cluster c = parse_cluster("ranks 64\n" + levels, "c");
  resize_cluster(c, 16384);
  EXPECT_EQ(c.nranks(), 16384);
  try {
    resize_cluster(c, 100);
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_STREQ(e.what(), "c:3: 100 ranks do not divide into groups of 8 (the levels below 'net')");
  }
}

// A node described by an hwloc XML: a rank per GPU, the slowest NVLink pair, the RDMA NICs.
TEST(Cluster, ANodeFromAnHwlocFile) {
  const Cluster c = load_cluster(std::string(STRATA_SIM_TESTS) + "/data/dgx2-pod.cluster");
  EXPECT_EQ(c.levels[0].size, 16);
  EXPECT_EQ(c.levels[0].bandwidth_Bps, 150e9) << "6 NVSwitch links of 25 GB/s (docs/topology.md)";
  EXPECT_EQ(c.levels[1].links, 2) << "mlx5_0 and mlx5_1; eth0 is not RDMA";
  EXPECT_EQ(c.nranks(), 64);
  EXPECT_NE(error_of("level node hwloc /nonexistent.xml latency 1us\n").find("c.cluster:1: "), std::string::npos);
}

TEST(Cluster, ErrorsNameTheLine) {
  const std::string node = "level node size 2 bandwidth 1GB/s latency 1us\n";
  EXPECT_EQ(error_of(""), "c.cluster: no levels: a cluster needs at least 'level node size N bandwidth RATE latency TIME'");
  EXPECT_EQ(error_of("\n# x\nlevel node size 0 bandwidth 1GB/s latency 1us\n"),
            "c.cluster:3: size '0' is not a whole number in [1, 16777216]");
  EXPECT_EQ(error_of("level node size 2 bandwith 1GB/s latency 1us\n"),
            "c.cluster:1: 'bandwith' is not a level setting (size, bandwidth, latency, links, oversubscription, "
            "efficiency, burst, peak, buffer, overhead, forwards; hwloc on the innermost level)");
  EXPECT_EQ(error_of("level node size 2 bandwidth fast latency 1us\n"),
            "c.cluster:1: bandwidth 'fast' is not a rate like 50GB/s, 400Gbit/s or 1gbit");
  EXPECT_EQ(error_of("level node size 2 bandwidth 1GB/s\n"), "c.cluster:1: level 'node' needs a latency");
  EXPECT_EQ(error_of(node + "level net size 3 bandwidth 1GB/s latency 1us oversubscription 2\n"),
            "c.cluster:2: oversubscription needs a level below with links to oversubscribe: give this level links N");
  EXPECT_EQ(error_of(node + "level net bandwidth 1GB/s latency 1us\n"),
            "c.cluster:2: level 'net' needs its size, or the file a 'ranks N' line");
  EXPECT_EQ(error_of("ranks 7\n" + node + "level net bandwidth 1GB/s latency 1us\n"),
            "c.cluster:3: 7 ranks do not divide into groups of 2 (the levels below 'net')");
  EXPECT_EQ(error_of(node + "level net size 2 bandwidth 1GB/s latency 1us\nranks 6\n"),
            "c.cluster:3: ranks 6 but the levels make 4");
  EXPECT_EQ(error_of(node + node), "c.cluster:2: level 'node' is declared twice");
  EXPECT_EQ(error_of("link_model node:fast\n" + node),
            "c.cluster:1: STRATA_LINK_MODEL: 'node:fast' is not level:latency:bandwidth or "
            "level:latency:bandwidth:overhead (e.g. node:1us:6GB)");
  EXPECT_EQ(error_of(node + "speed 3\n"),
            "c.cluster:2: 'speed' is not a cluster setting (name, ranks, level, copy, reduce, eager, oversubscribed, "
            "hierarchy, link_model, memory)");
  EXPECT_EQ(error_of(node + "level net size 2 bandwidth 1GB/s latency 1us burst 1MB\n"),
            "c.cluster:2: a token bucket needs both burst and peak");
}

}  // namespace
}  // namespace strata::sim
