#include "relayout.hpp"

#include <unistd.h>

#include "checkpoint.hpp"
#include "device/choose.hpp"
#include "errors.hpp"
#include "pipeline_schedule.hpp"

namespace strata::train {

std::unique_ptr<ParallelGroups> make_groups(const Options& o, Group world, int first_slice) {
  GridShape shape;
  shape.size[kTp] = o.tp;
  shape.size[kPp] = o.pp;
  shape.size[kDp] = world.size() / (o.tp * o.pp);
  if (!o.layout.empty()) shape.order = parse_grid_order(o.layout);
  return std::make_unique<ParallelGroups>(world, shape, *parse_schedule(o.schedule) == Schedule::interleaved,
                                          first_slice, o.dp);
}

namespace {

// The largest data-parallel size of at most `most` that the options allow (validate_options
// says what they need: the batch and its microbatches divide), or 0.
int largest_dp(const Options& o, int most) {
  for (int dp = most; dp >= 1; --dp) {
    Options fit = o;
    fit.dp = dp;
    try {
      validate_options(fit, dp * o.tp * o.pp, true, default_device);
      return dp;
    } catch (const TrainError&) {
    }
  }
  return 0;
}

bool has_checkpoint(const std::string& dir) {
  return !dir.empty() && ::access(checkpoint_path(dir).c_str(), F_OK) == 0;
}

// The step of the checkpoint in `dir` (-1: none), the same on every rank of `world`.
int agreed_checkpoint(const std::string& dir, Group& world) {
  int step = -1;
  if (has_checkpoint(dir)) step = static_cast<int>(CheckpointReader(dir).header().step);
  float range[2] = {static_cast<float>(step), static_cast<float>(-step)};  // max, and -min
  world.all_reduce(range, range, 2, strata::ReduceOp::max).wait();
  if (range[0] != -range[1])
    throw TrainError("after the failure the ranks that go on read different checkpoints in " + dir + " (steps " +
                     std::to_string(static_cast<int>(-range[1])) + " to " + std::to_string(static_cast<int>(range[0])) +
                     "; -1: none): --save must name a directory every rank sees");
  return step;
}

}  // namespace

std::string Relayout::lost_text() const {
  std::string t = lost.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < lost.size(); ++i) t += (i ? ", " : "") + std::to_string(lost[i]);
  return t;
}

Relayout relayout_after_failure(Options& o, ParallelGroups& groups) {
  const int before = groups.world().size();
  const float me = static_cast<float>(groups.world().rank());
  Group left = groups.survivors();
  Relayout r;
  r.survivors = left.size();
  std::vector<float> alive(static_cast<size_t>(r.survivors));
  left.all_gather(&me, alive.data(), 1).wait();
  for (int k = 0, next = 0; k < before; ++k) {
    if (next < r.survivors && alive[static_cast<size_t>(next)] == static_cast<float>(k)) ++next;
    else r.lost.push_back(k);
  }
  const int mp = o.tp * o.pp;
  r.dp = r.survivors >= mp ? largest_dp(o, r.survivors / mp) : 0;
  if (r.dp == 0) {
    left.destroy();
    throw TrainError(std::to_string(r.survivors) + " ranks are left, too few for --tp " + std::to_string(o.tp) +
                     " x --pp " + std::to_string(o.pp) + ": the run cannot go on; --resume from " + o.save +
                     " with enough ranks");
  }
  o.dp = r.dp;
  r.stays = left.rank() < r.dp * mp;
  r.world = left.split(r.stays ? 0 : -1, left.rank());
  left.destroy();
  if (!r.stays) return r;
  // The last complete checkpoint: this run's, or before it saved one, the one it resumed.
  r.checkpoint_dir = has_checkpoint(o.save) || o.resume.empty() ? o.save : o.resume;
  r.checkpoint_step = std::max(0, agreed_checkpoint(r.checkpoint_dir, r.world));
  return r;
}

}  // namespace strata::train
