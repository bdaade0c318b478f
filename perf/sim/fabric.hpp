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

class Fabric {
 public:
  explicit Fabric(const Cluster& c);

  const std::vector<LinkSpec>& links() const { return links_; }
  // The links a message from `src` to `dst` crosses; returns how many (<= FlowNetwork::kMaxPath).
  int route(int src, int dst, uint32_t* path) const;
  double latency(int src, int dst) const { return cluster_.levels[cluster_.common_level(src, dst)].latency_s; }
  double buffer(int src, int dst) const { return cluster_.levels[cluster_.common_level(src, dst)].buffer_bytes; }
  const Cluster& cluster() const { return cluster_; }

 private:
  const Cluster& cluster_;
  std::vector<uint32_t> base_;  // first link of each level
  std::vector<LinkSpec> links_;
};

}  // namespace strata::sim
