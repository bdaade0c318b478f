// strata-train --diloco-h ... --on-failure continue: an island that loses a rank stops, and
// the islands that are whole go on without it (docs/training.md, "An island fails").
//
// Islands exchange nothing between outer steps, so the others learn of a lost island at
// the next exchange (or a checkpoint's barrier), which fails: an OuterFailure. A rank whose
// own island lost a member learns it in an inner collective instead (a PeerError) and
// stops at once. The others abort the outer sync (so that an island rank still inside the
// exchange fails too), shrink the job's communicator (Comm::shrink: they agree on who is
// alive), and keep the islands all of whose ranks are: those go back to the state keep()
// kept at the last outer step -- replica, outer snapshot and momentum -- and go on as a
// job of fewer islands, exactly as a run started with that many islands from a checkpoint
// of that step: each island keeps its share of the global batch (--batch and --dp shrink
// with --islands), and the outer average is over the islands left.
#include <algorithm>
#include <cstring>

#include "diloco.hpp"
#include "errors.hpp"

namespace strata::train {

void Diloco::keep(Trainer& trainer) {
  const size_t n = trainer.param_count();
  kept_snapshot_.resize(n);
  kept_momentum_.resize(n);
  between_islands([&] { outer_.save_state(kept_snapshot_.data(), kept_momentum_.data()); });
  kept_steps_ = outer_.steps();
  kept_ = trainer.keep();
}

Diloco::IslandLoss Diloco::go_on_without_lost_islands(Options& o, Trainer& trainer, ParallelGroups& groups) {
  retire_outer(true);
  shard_.abort();
  const int K = o.outer.islands, ranks = job_.size(), size = ranks / K, me = job_.rank();
  strata::Comm alive = job_.shrink();  // PeerError when the others left this rank out
  job_.destroy();

  // Who is alive, the outer step each kept and the step it is at.
  struct Entry {
    int32_t rank, kept, step;
  };
  const Entry mine{me, static_cast<int32_t>(kept_steps_), trainer.step()};
  std::vector<Entry> all(static_cast<size_t>(alive.size()));
  alive.all_gather(&mine, all.data(), sizeof mine, strata::DataType::uint8);
  std::vector<int> members(static_cast<size_t>(K), 0), kept(static_cast<size_t>(K), -1), at(static_cast<size_t>(K), -1);
  std::vector<char> is_alive(static_cast<size_t>(ranks), 0);
  for (const Entry& e : all) {
    const size_t k = static_cast<size_t>(e.rank / size);
    ++members[k];
    kept[k] = std::max(kept[k], static_cast<int>(e.kept));
    at[k] = std::max(at[k], static_cast<int>(e.step));
    is_alive[static_cast<size_t>(e.rank)] = 1;
  }
  IslandLoss r;
  for (int x = 0; x < ranks; ++x)
    if (!is_alive[static_cast<size_t>(x)]) r.dead.push_back(x);
  // The whole islands go back to the latest outer step any of them kept. One that kept the
  // outer step before it, and is at that step, missed only the exchange's end (the dead
  // rank sent to some islands before it died): it takes the result from one that has it.
  int back_to = -1;
  for (int k = 0; k < K; ++k)
    if (members[static_cast<size_t>(k)] == size) back_to = std::max(back_to, kept[static_cast<size_t>(k)]);
  std::vector<char> goes_on(static_cast<size_t>(K), 0), behind(static_cast<size_t>(K), 0);
  for (int k = 0; k < K; ++k) {
    const size_t x = static_cast<size_t>(k);
    behind[x] = kept[x] == back_to - o.diloco_h && at[x] == back_to;
    goes_on[x] = members[x] == size && (kept[x] == back_to || behind[x]);
    if (goes_on[x]) ++r.islands;
    else r.lost.push_back(k);
  }
  const int mine_island = me / size;
  r.stays = goes_on[static_cast<size_t>(mine_island)];
  if (!r.stays)
    r.why = members[static_cast<size_t>(mine_island)] < size
                ? "island " + std::to_string(mine_island) + " lost a rank"
                : "island " + std::to_string(mine_island) + " kept outer step " + std::to_string(kept_steps_) +
                      " and is at step " + std::to_string(trainer.step()) + ", the others kept step " +
                      std::to_string(back_to);
  strata::Comm next = alive.split(r.stays ? 0 : strata::kSplitNoColor, started_as_);
  alive.destroy();
  if (!r.stays) return r;

  // A job of r.islands islands, numbered in their old order, each with its share.
  const int dp_per_island = o.dp / K, batch_per_island = o.batch / K;
  std::vector<char> takes;  // by new rank: its island missed the exchange's end
  for (int k = 0; k < K; ++k)
    if (goes_on[static_cast<size_t>(k)]) takes.insert(takes.end(), static_cast<size_t>(size), behind[static_cast<size_t>(k)]);
  o.outer.islands = r.islands;
  o.dp = r.islands * dp_per_island;
  o.batch = r.islands * batch_per_island;
  job_ = next;
  island_ = job_.rank() / size;
  groups.reslice(island_ * dp_per_island, o.dp);
  trainer.reslice();
  for (int k = 0; k < r.islands; ++k)
    if (takes[static_cast<size_t>(k * size)]) r.caught_up.push_back(k);
  if (!r.caught_up.empty()) {
    // Its own state is the one at that step, before the exchange; the exchange's result,
    // the outer state, comes from the rank at its coordinates in an island that has it,
    // and replaces the parameters (--mix 0, one fragment: the whole buffer).
    if (takes[static_cast<size_t>(job_.rank())]) kept_ = trainer.keep();
    share_kept(takes, groups, false);
    if (takes[static_cast<size_t>(job_.rank())]) kept_.params = kept_snapshot_;
  }
  // Back to the last outer step, over the islands left: the new outer sync checks that
  // every rank starts from one model, the global one it kept.
  std::copy(kept_snapshot_.begin(), kept_snapshot_.end(), trainer.params());
  connect(trainer);
  outer_.load_state(kept_snapshot_.data(), kept_momentum_.data(), kept_steps_);
  trainer.restore(kept_);
  r.step = kept_.step;
  door_ = false;
  wait_for_replacements();
  return r;
}

void Diloco::wait_for_replacements() {
  const strata::LaunchInfo launch = strata::launch_info();
  if (launch.rendezvous.empty() || job_.size() >= launch.size || door_) return;
  between_islands([&] { job_.open_door(launch.rendezvous); });
  door_ = true;
}

}  // namespace strata::train
