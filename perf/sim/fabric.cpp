#include "fabric.hpp"

#include <stdexcept>
#include <string>

namespace strata::sim {

Fabric::Fabric(const Cluster& c, int period) : cluster_(c), period_(period ? period : c.nranks()) {
  if (c.nranks() % period_ != 0 || period_ % c.rotation_period() != 0)
    throw std::logic_error("a fabric folds by a multiple of " + std::to_string(c.rotation_period()) + " dividing " +
                           std::to_string(c.nranks()) + ", not " + std::to_string(period_));
  if (2 * (c.levels.size() - 1) > static_cast<size_t>(FlowNetwork::kMaxPath))
    throw ClusterError(c.source + ": at most " + std::to_string(FlowNetwork::kMaxPath / 2 + 1) + " levels");
  for (size_t i = 0; i < c.levels.size(); ++i) {
    const LevelDesc& l = c.levels[i];
    base_.push_back(static_cast<uint32_t>(links_.size()));
    // Level 0: a port per rank; above: an uplink per group of the level below.
    const long ends = i == 0 ? period_ : period_ / c.ranks_per_group(i - 1);
    const double rate = i == 0 ? l.bandwidth_Bps : c.uplink_Bps(i);
    const double links = rate / l.bandwidth_Bps;  // a bucket per link: the uplink has `links` of them
    for (long e = 0; e < 2 * ends; ++e) links_.push_back({rate, l.burst_bytes * links, l.peak_Bps * links, static_cast<int>(i)});
  }
}

int Fabric::route(int src, int dst, uint32_t* path) const {
  const size_t top = cluster_.common_level(src, dst);
  // Folded, a rank's or group's links are those of its representative (the same index
  // modulo the period's ranks or groups).
  auto end = [&](int rank, size_t level) {
    return static_cast<uint32_t>((rank % period_) / cluster_.ranks_per_group(level));
  };
  if (top == 0) {
    path[0] = base_[0] + 2 * static_cast<uint32_t>(src % period_);
    path[1] = base_[0] + 2 * static_cast<uint32_t>(dst % period_) + 1;
    return 2;
  }
  int n = 0;
  for (size_t i = 1; i <= top; ++i) {
    path[n++] = base_[i] + 2 * end(src, i - 1);
    path[n++] = base_[i] + 2 * end(dst, i - 1) + 1;
  }
  return n;
}

}  // namespace strata::sim
