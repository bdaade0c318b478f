// The cluster's links as a flow network sees them, and the path of every message.
//
//   level 0: every rank has a port into its group's fabric, one link each way (NVLink into
//            an NVSwitch, or shared memory): a message inside a group crosses the sender's
//            port out and the receiver's port in.
//   level i: every group of level i-1 has an uplink into level i, one link each way, of
//            its links' total (or its sub-groups' uplinks / oversubscription). A message
//            whose ranks first share a group at level L goes up the sender's uplinks of
//            levels 1..L and down the receiver's; switches themselves never block.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster.hpp"
#include "flows.hpp"

namespace strata::sim {

//   folded: for plans that are rotation symmetric, only the links of ranks [0, period)
//            (period: a multiple of the ranks of a group of the level below the outermost,
//            Cluster::rotation_period): rank r's port and its groups' uplinks stand for
//            those of every rank r + k * period, which carry the same flows at the same
//            rates when every rank's plan is its representative's moved on (PlanSet).
class Fabric {
 public:
  explicit Fabric(const Cluster& c, int period = 0);  // 0: every rank

  const std::vector<LinkSpec>& links() const { return links_; }
  // The links a message from `src` to `dst` (real ranks) crosses; returns how many (<=
  // FlowNetwork::kMaxPath). Folded, the representatives' links.
  int route(int src, int dst, uint32_t* path) const;
  int period() const { return period_; }
  // How many real links each link here stands for.
  int fold() const { return cluster_.nranks() / period_; }
  double latency(int src, int dst) const { return cluster_.levels[cluster_.common_level(src, dst)].latency_s; }
  double buffer(int src, int dst) const { return cluster_.levels[cluster_.common_level(src, dst)].buffer_bytes; }
  double overhead(int src, int dst) const { return cluster_.levels[cluster_.common_level(src, dst)].overhead_s; }
  const Cluster& cluster() const { return cluster_; }

 private:
  const Cluster& cluster_;
  int period_;
  std::vector<uint32_t> base_;  // first link of each level
  std::vector<LinkSpec> links_;
};

}  // namespace strata::sim
