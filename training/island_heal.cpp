// strata-train --on-failure continue: an island that comes back (strata-train --join,
// started with the lost ranks' launcher variables) heals from a live one (docs/training.md,
// "An island fails").
//
// After losing an island, rank 0 of the islands left opens a door for newcomers at the
// job's rendezvous (Comm::open_door at the address its ranks started from). A replacement
// rank goes there (Comm::join_from_env, keyed by the rank it replaces) and waits. At every
// outer step the islands left ask how many wait (Comm::newcomers); once a whole island's
// worth do, they grow the job's communicator with them (Comm::grow: ranks in the order the
// job started with, the door checking the job's secret as the bootstrap does). Then, on
// both sides alike: meet() (who is new; the newcomers make their island's groups), and
// settle(): each newcomer rank receives, from the rank at its coordinates in the first live
// island, that rank's state as keep() kept it at this outer step -- parameters, Adam
// moments, outer snapshot and momentum, step and data position, its shard of each -- and
// every rank goes back to it on an outer sync over all the islands. The newcomers' data
// slices are their islands' again, and --islands, --dp and --batch are the job's at start.
#include <chrono>
#include <cstring>

#include "diloco.hpp"
#include "errors.hpp"

namespace strata::train {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The scalar state a newcomer takes, as 64-bit words: step, outer steps, data generator
// state and batches drawn.
constexpr size_t kWords = 7;

}  // namespace

Welcome meet(Options& o, strata::Comm grown, int started_as, bool newcomer) {
  const int per_island = o.dp / o.outer.islands, batch_per_island = o.batch / o.outer.islands;
  const int size = o.tp * o.pp * per_island;  // ranks per island
  const int32_t mine[2] = {started_as, newcomer ? 1 : 0};
  std::vector<int32_t> all(2 * static_cast<size_t>(grown.size()));
  between_islands([&] { grown.all_gather(mine, all.data(), 2, strata::DataType::int32); });
  Welcome w;
  for (int r = 0; r < grown.size(); ++r) {
    w.started_as.push_back(all[2 * static_cast<size_t>(r)]);
    w.newcomer.push_back(static_cast<char>(all[2 * static_cast<size_t>(r) + 1]));
  }
  w.islands = grown.size() / size;
  for (int k = 0; k < w.islands; ++k)
    for (int r = k * size; r < (k + 1) * size; ++r)
      if (w.newcomer[static_cast<size_t>(r)] != w.newcomer[static_cast<size_t>(k * size)])
        throw TrainError("the ranks that joined do not make whole islands (rank " + std::to_string(r) +
                         " of the grown job): start every rank of a lost island with --join");
  o.outer.islands = w.islands;
  o.dp = w.islands * per_island;
  o.batch = w.islands * batch_per_island;
  const int island = grown.rank() / size;
  strata::Comm mates;
  between_islands([&] { mates = grown.split(newcomer ? island : strata::kSplitNoColor, grown.rank()); });
  if (newcomer) w.island = mates.valid() && mates.size() > 1 ? Group(mates) : Group();
  if (mates.valid() && mates.size() == 1) mates.destroy();
  return w;
}

Diloco::Diloco(const Options& o, strata::Comm job, Trainer& trainer, ParallelGroups& groups, const Welcome& welcome)
    : o_(o),
      job_(job),
      started_as_(welcome.started_as[static_cast<size_t>(job.rank())]),
      island_(island_of(o, job.rank(), job.size())),
      shard_id_(shard_id(o, groups)) {
  settle(trainer, groups, welcome);
  wait_for_replacements();  // as the others do after taking it back
}

int Diloco::newcomers() {
  if (!door_) return 0;
  int n = 0;
  between_islands([&] { n = job_.newcomers(); });
  return n;
}

Diloco::Healing Diloco::take_back(Options& o, Trainer& trainer, ParallelGroups& groups, int waiting) {
  Healing h;
  const double t0 = now_s();
  strata::Comm grown;
  try {
    grown = job_.grow(waiting, started_as_);
  } catch (const strata::Error& e) {  // a newcomer left, or did not come: the job is as it was
    h.why = e.what();
    return h;
  }
  const Welcome w = meet(o, grown, started_as_, false);
  job_.destroy();
  job_ = grown;
  door_ = false;
  island_ = island_of(o, job_.rank(), job_.size());
  groups.reslice(first_slice(o, job_.rank(), job_.size()), o.dp);
  trainer.reslice();
  h.bytes = settle(trainer, groups, w);
  const int size = job_.size() / w.islands;
  for (int k = 0; k < w.islands; ++k)
    if (w.newcomer[static_cast<size_t>(k * size)]) h.islands.push_back(k);
    else if (h.donor < 0) h.donor = k;
  h.healed = true;
  h.seconds = now_s() - t0;
  wait_for_replacements();  // for islands still lost
  return h;
}

uint64_t Diloco::share_kept(const std::vector<char>& takes, ParallelGroups& groups, bool replica) {
  const int size = job_.size() / o_.outer.islands, me = job_.rank();
  // Each rank's coordinates in its island: a taker's donor is the rank at the same ones in
  // the first island that takes nothing.
  const int32_t coords[3] = {groups.coord(kTp), groups.coord(kPp), groups.coord(kDp)};
  std::vector<int32_t> all(3 * static_cast<size_t>(job_.size()));
  between_islands([&] { job_.all_gather(coords, all.data(), 3, strata::DataType::int32); });
  int donor_island = 0;
  while (takes[static_cast<size_t>(donor_island * size)]) ++donor_island;
  auto same_place = [&](int a, int b) {
    return std::memcmp(&all[3 * static_cast<size_t>(a)], &all[3 * static_cast<size_t>(b)], 3 * sizeof(int32_t)) == 0;
  };
  const size_t n = kept_.params.size();
  if (takes[static_cast<size_t>(me)]) {
    kept_snapshot_.resize(n);
    kept_momentum_.resize(n);
  }
  uint64_t words[kWords] = {static_cast<uint64_t>(kept_.step), static_cast<uint64_t>(kept_steps_)};
  std::memcpy(words + 2, kept_.sampler.rng().state(), 4 * sizeof(uint64_t));
  words[6] = kept_.sampler.batches_drawn();
  std::vector<std::vector<float>*> pieces = {&kept_snapshot_, &kept_momentum_};
  if (replica) pieces.insert(pieces.begin(), {&kept_.params, &kept_.m, &kept_.v});
  uint64_t sent = 0;
  std::vector<strata::Request> sending;
  between_islands([&] {
    for (int r = 0; r < job_.size(); ++r) {
      if (!takes[static_cast<size_t>(r)]) continue;
      const int donor = donor_island * size + (r % size);
      if (!same_place(r, donor))
        throw TrainError("rank " + std::to_string(r) + " has other coordinates than rank " + std::to_string(donor) +
                         " of island " + std::to_string(donor_island) + ", whose state it was to take");
      if (me == donor) {
        sending.push_back(job_.send_async(words, kWords, strata::DataType::uint64, r));
        for (std::vector<float>* v : pieces) {
          sending.push_back(job_.send_async(v->data(), v->size(), strata::DataType::float32, r));
          sent += v->size() * sizeof(float);
        }
        sent += sizeof words;
      } else if (me == r) {
        job_.recv(words, kWords, strata::DataType::uint64, donor);
        for (std::vector<float>* v : pieces) job_.recv(v->data(), v->size(), strata::DataType::float32, donor);
      }
    }
    for (strata::Request& q : sending) q.wait();
  });
  if (takes[static_cast<size_t>(me)]) {
    kept_steps_ = static_cast<long long>(words[1]);
    if (replica) {
      kept_.step = static_cast<int>(words[0]);
      kept_.sampler.restore(words + 2, words[6]);
    }
  }
  uint64_t total = 0;
  between_islands([&] { job_.all_reduce(&sent, &total, 1, strata::DataType::uint64, strata::ReduceOp::sum); });
  return total;
}

uint64_t Diloco::settle(Trainer& trainer, ParallelGroups& groups, const Welcome& w) {
  // The old outer sync (over the islands that were left) has nothing in flight at an outer
  // step's boundary; the new one is made below.
  retire_outer(false);
  if (shard_.valid()) shard_.destroy();
  if (w.newcomer[static_cast<size_t>(job_.rank())]) kept_ = trainer.keep();  // sized as the donor's: the same layout
  const uint64_t bytes = share_kept(w.newcomer, groups, true);
  // Every island goes back to the same outer step, on an outer sync over all of them.
  std::copy(kept_snapshot_.begin(), kept_snapshot_.end(), trainer.params());
  between_islands([&] {
    connect(trainer);
    outer_.load_state(kept_snapshot_.data(), kept_momentum_.data(), kept_steps_);
  });
  trainer.restore(kept_);
  return bytes;
}

}  // namespace strata::train
