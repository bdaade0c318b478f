#include "flows.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace strata::sim {

FlowNetwork::FlowNetwork(std::vector<LinkSpec> links) : spec_(std::move(links)) {
  links_.resize(spec_.size());
  use_.resize(spec_.size());
  for (size_t i = 0; i < spec_.size(); ++i) {
    const LinkSpec& s = spec_[i];
    if (!(s.rate_Bps > 0)) throw std::invalid_argument("a link needs a positive rate");
    links_[i].tokens = s.burst_bytes;  // the bucket starts full
    links_[i].capacity = s.burst_bytes > 0 ? s.peak_Bps : s.rate_Bps;
  }
  left_.resize(spec_.size());
  unfrozen_.resize(spec_.size());
  stamp_.resize(spec_.size());
  seen_link_.resize(spec_.size());
}

void FlowNetwork::mark(uint32_t link) {
  if (links_[link].dirty) return;
  links_[link].dirty = true;
  dirty_.push_back(link);
}

void FlowNetwork::add(const uint32_t* path, int n, double bytes, double now, Tag tag) {
  if (n < 1 || n > kMaxPath) throw std::invalid_argument("a flow's path needs 1 to 16 links");
  uint32_t id;
  if (free_.empty()) {
    id = static_cast<uint32_t>(flows_.size());
    flows_.push_back({});
    seen_flow_.push_back(0);
  } else {
    id = free_.back();
    free_.pop_back();
  }
  Flow& f = flows_[id];
  f.remaining = f.bytes = bytes;
  f.rate = 0;
  f.last = now;
  ++f.version;
  f.tag = tag;
  f.n = n;
  f.active = true;
  for (int k = 0; k < n; ++k) {
    Link& l = links_[path[k]];
    f.link[k] = path[k];
    f.pos[k] = static_cast<uint32_t>(l.flows.size());
    l.flows.push_back(id);
    mark(path[k]);
  }
}

void FlowNetwork::remove(uint32_t id) {
  Flow& f = flows_[id];
  for (int k = 0; k < f.n; ++k) {
    const uint32_t li = f.link[k];
    Link& l = links_[li];
    const uint32_t moved = l.flows.back();
    if (moved != id) {
      l.flows[f.pos[k]] = moved;
      Flow& m = flows_[moved];
      for (int j = 0; j < m.n; ++j)
        if (m.link[j] == li) m.pos[j] = f.pos[k];
    }
    l.flows.pop_back();
    use_[li].bytes += f.bytes;
    mark(li);
  }
  f.active = false;
  ++f.version;
  free_.push_back(id);
}

double FlowNetwork::next_time(double now) {
  if (!dirty_.empty()) reallocate(now);
  while (!events_.empty()) {
    const Event& e = events_.top();
    const bool stale = e.is_flow ? !flows_[e.id].active || flows_[e.id].version != e.version
                                 : links_[e.id].version != e.version;
    if (!stale) return e.time;
    events_.pop();
  }
  return HUGE_VAL;
}

void FlowNetwork::complete_until(double t, std::vector<Tag>& done) {
  while (!events_.empty() && events_.top().time <= t) {
    const Event e = events_.top();
    events_.pop();
    if (e.is_flow) {
      Flow& f = flows_[e.id];
      if (!f.active || f.version != e.version) continue;
      done.push_back(f.tag);
      remove(e.id);
    } else {
      Link& l = links_[e.id];
      if (l.version != e.version) continue;
      l.tokens = 0;  // ran dry: from now on the link runs at its rate
      l.token_time = e.time;
      l.capacity = spec_[e.id].rate_Bps;
      ++l.version;
      mark(e.id);
    }
  }
}

void FlowNetwork::reallocate(double now) {
  ++reallocations_;
  ++epoch_;
  std::vector<uint32_t> comp_links, comp_flows;
  // Everything connected to a dirty link through shared flows.
  for (uint32_t d : dirty_) {
    links_[d].dirty = false;
    if (seen_link_[d] == epoch_) continue;
    seen_link_[d] = epoch_;
    const size_t begin = comp_links.size();
    comp_links.push_back(d);
    for (size_t i = begin; i < comp_links.size(); ++i)
      for (uint32_t fid : links_[comp_links[i]].flows) {
        if (seen_flow_[fid] == epoch_) continue;
        seen_flow_[fid] = epoch_;
        comp_flows.push_back(fid);
        const Flow& f = flows_[fid];
        for (int k = 0; k < f.n; ++k)
          if (seen_link_[f.link[k]] != epoch_) seen_link_[f.link[k]] = epoch_, comp_links.push_back(f.link[k]);
      }
  }
  dirty_.clear();
  fill(comp_flows, comp_links, now);
}

void FlowNetwork::fill(const std::vector<uint32_t>& flows, const std::vector<uint32_t>& links, double now) {
  for (uint32_t fid : flows) {
    Flow& f = flows_[fid];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last));
    f.last = now;
  }
  struct Share {
    double share;
    uint32_t link, stamp;
    bool operator>(const Share& o) const { return share > o.share; }
  };
  std::priority_queue<Share, std::vector<Share>, std::greater<Share>> heap;
  for (uint32_t li : links) {
    Link& l = links_[li];
    const LinkSpec& s = spec_[li];
    if (s.burst_bytes > 0) {
      l.tokens = std::clamp(l.tokens + (s.rate_Bps - l.used) * (now - l.token_time), 0.0, s.burst_bytes);
      l.token_time = now;
      l.capacity = l.tokens > 1 ? s.peak_Bps : s.rate_Bps;
    }
    left_[li] = l.capacity;
    unfrozen_[li] = static_cast<int>(l.flows.size());
    if (unfrozen_[li] > 0) heap.push({left_[li] / unfrozen_[li], li, ++stamp_[li]});
  }
  // Progressive filling: the link whose fair share is smallest fixes the rate of all its
  // flows not yet fixed; what they take is removed from the other links on their paths.
  const uint32_t frozen = ++epoch_;
  while (!heap.empty()) {
    const Share top = heap.top();
    heap.pop();
    const uint32_t li = top.link;
    if (top.stamp != stamp_[li] || unfrozen_[li] == 0) continue;
    const double share = std::max(0.0, left_[li]) / unfrozen_[li];
    for (uint32_t fid : links_[li].flows) {
      Flow& f = flows_[fid];
      if (seen_flow_[fid] == frozen) continue;
      seen_flow_[fid] = frozen;
      f.rate = share;
      for (int k = 0; k < f.n; ++k) {
        const uint32_t l2 = f.link[k];
        left_[l2] -= share;
        if (--unfrozen_[l2] > 0 && l2 != li) heap.push({std::max(0.0, left_[l2]) / unfrozen_[l2], l2, ++stamp_[l2]});
      }
    }
  }
  for (uint32_t li : links) {
    Link& l = links_[li];
    const LinkSpec& s = spec_[li];
    double used = 0;
    for (uint32_t fid : l.flows) used += flows_[fid].rate;
    l.used = used;
    LinkUse& u = use_[li];
    if (used > u.peak_used_Bps * (1 + 1e-9)) u.peak_used_Bps = used, u.peak_time_s = now, u.peak_flows = static_cast<int>(l.flows.size());
    ++l.version;
    if (s.burst_bytes > 0 && l.capacity > s.rate_Bps && used > s.rate_Bps)
      events_.push({now + l.tokens / (used - s.rate_Bps), li, l.version, false});
  }
  for (uint32_t fid : flows) {
    Flow& f = flows_[fid];
    ++f.version;
    if (f.rate > 0) events_.push({now + f.remaining / f.rate, fid, f.version, true});
  }
}

}  // namespace strata::sim
