// A flow-level network: links of given capacity, flows over paths of links, and rates by
// max-min fairness (progressive filling): every flow gets the largest rate such that no
// link is over its capacity and no flow could go faster without slowing one that is no
// faster. Rates are recomputed only for the flows connected (through shared links) to a
// link where a flow came, left or a capacity changed; events that fall within a nanosecond
// are taken together, so a round of thousands of equal flows is one recomputation.
//
// A link may have a token bucket (tc's tbf): while it holds tokens the link runs at its
// peak rate, and the bucket drains at (used - rate); empty, the link runs at its rate and
// refills at (rate - used), up to `burst` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

namespace strata::sim {

struct LinkSpec {
  double rate_Bps;
  double burst_bytes = 0;  // > 0: a token bucket
  double peak_Bps = 0;
  int level = 0;           // the cluster level it belongs to, for reports
};

// What a link did over a run.
struct LinkUse {
  double bytes = 0;            // carried in total
  double peak_used_Bps = 0;    // its busiest moment: the highest total rate of its flows
  double peak_time_s = 0;      // when that began
  int peak_flows = 0;          // flows sharing it then
};

class FlowNetwork {
 public:
  static constexpr int kMaxPath = 16;
  using Tag = uint32_t;

  explicit FlowNetwork(std::vector<LinkSpec> links);

  // A flow of `bytes` over `path` from `now`; `tag` is handed back when it ends.
  void add(const uint32_t* path, int n, double bytes, double now, Tag tag);
  // When the next flow ends or token bucket runs dry (+inf: nothing in flight), after
  // recomputing the rates that changed since the last call at `now`.
  double next_time(double now);
  // Ends the flows due by `t` (appending their tags to `done`) and applies the token
  // buckets that ran dry by then.
  void complete_until(double t, std::vector<Tag>& done);

  size_t active_flows() const { return flows_.size() - free_.size(); }
  const std::vector<LinkUse>& use() const { return use_; }
  const std::vector<LinkSpec>& links() const { return spec_; }
  size_t reallocations() const { return reallocations_; }

 private:
  struct Flow {
    double remaining, rate, last, bytes;
    uint32_t version;
    Tag tag;
    int n;
    bool active;
    uint32_t link[kMaxPath];
    uint32_t pos[kMaxPath];  // index in each link's flow list
  };
  struct Link {
    double capacity;
    double used = 0;
    double tokens = 0, token_time = 0;
    uint32_t version = 0;  // of its token event
    bool dirty = false;
    std::vector<uint32_t> flows;
  };
  struct Event {
    double time;
    uint32_t id, version;
    bool is_flow;
    bool operator>(const Event& o) const { return time > o.time; }
  };

  void mark(uint32_t link);
  void reallocate(double now);
  void fill(const std::vector<uint32_t>& flows, const std::vector<uint32_t>& links, double now);
  void remove(uint32_t flow);

  std::vector<LinkSpec> spec_;
  std::vector<Link> links_;
  std::vector<LinkUse> use_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> dirty_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  // Scratch of the progressive filling, indexed by link / flow.
  std::vector<double> left_;
  std::vector<int> unfrozen_;
  std::vector<uint32_t> stamp_, seen_link_, seen_flow_;
  uint32_t epoch_ = 0;
  size_t reallocations_ = 0;
};

}  // namespace strata::sim
