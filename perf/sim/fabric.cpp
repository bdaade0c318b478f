#include "fabric.hpp"

namespace strata::sim {

Fabric::Fabric(const Cluster& c) : cluster_(c) {
  if (2 * (c.levels.size() - 1) > static_cast<size_t>(FlowNetwork::kMaxPath))
    throw ClusterError(c.source + ": at most " + std::to_string(FlowNetwork::kMaxPath / 2 + 1) + " levels");
  for (size_t i = 0; i < c.levels.size(); ++i) {
    const LevelDesc& l = c.levels[i];
    base_.push_back(static_cast<uint32_t>(links_.size()));
    // Level 0: a port per rank; above: an uplink per group of the level below.
    const long ends = i == 0 ? c.nranks() : c.nranks() / c.ranks_per_group(i - 1);
    const double rate = i == 0 ? l.bandwidth_Bps : c.uplink_Bps(i);
    const double links = rate / l.bandwidth_Bps;  // a bucket per link: the uplink has `links` of them
    for (long e = 0; e < 2 * ends; ++e) links_.push_back({rate, l.burst_bytes * links, l.peak_Bps * links, static_cast<int>(i)});
  }
}

int Fabric::route(int src, int dst, uint32_t* path) const {
  const size_t top = cluster_.common_level(src, dst);
  if (top == 0) {
    path[0] = base_[0] + 2 * static_cast<uint32_t>(src);
    path[1] = base_[0] + 2 * static_cast<uint32_t>(dst) + 1;
    return 2;
  }
  int n = 0;
  for (size_t i = 1; i <= top; ++i) {
    path[n++] = base_[i] + 2 * static_cast<uint32_t>(cluster_.group_of(src, i - 1));
    path[n++] = base_[i] + 2 * static_cast<uint32_t>(cluster_.group_of(dst, i - 1)) + 1;
  }
  return n;
}

}  // namespace strata::sim
