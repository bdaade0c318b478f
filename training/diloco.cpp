#include "diloco.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "errors.hpp"

namespace strata::train {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The layer groups of the whole model -- the embeddings, each block, the final LayerNorm --
// as the lengths of this rank's parameter buffer they take, in buffer order (0 for a group
// held by another pipeline stage; the last stage's copy of the tied embedding is in group 0
// with the first stage's). Padding belongs to the tensor held before it. Under ZeRO-3 the
// buffer is this rank's shard: each group's buckets' slices.
std::vector<size_t> layer_segments(const Trainer& trainer) {
  const ParamLayout& lay = trainer.layout();
  const ModelConfig& c = lay.config();
  std::vector<size_t> segs(static_cast<size_t>(layer_groups(c)), 0);
  if (trainer.sharded()) {
    for (int g = 0; g < layer_groups(c); ++g)
      for (int b = lay.group_span(g).first_bucket; b < lay.group_span(g).end_bucket; ++b)
        segs[static_cast<size_t>(g)] += lay.slice(lay.buckets()[b]);
    return segs;
  }
  std::vector<int> held;  // in id order, which is buffer order
  for (int id = 0; id < tensor_count(c); ++id)
    if (lay.holds(id)) held.push_back(id);
  for (size_t i = 0; i < held.size(); ++i) {
    const size_t end = i + 1 < held.size() ? lay.tensor(held[i + 1]).offset : lay.padded_size();
    segs[static_cast<size_t>(layer_group(c, held[i]))] += end - lay.tensor(held[i]).offset;
  }
  return segs;
}

}  // namespace

void between_islands(const std::function<void()>& call) {
  try {
    call();
  } catch (const strata::PeerError& e) {
    throw OuterFailure(std::string("between islands: ") + e.what());
  }
}

int island_of(const Options& o, int rank, int world) { return diloco_on(o) ? rank / (world / o.outer.islands) : 0; }

std::string replica_dir(const Options& o, const std::string& dir, int rank, int world) {
  if (!diloco_on(o)) return dir;
  return dir + "/island-" + std::to_string(island_of(o, rank, world));
}

std::string resume_dir(const Options& o, int rank, int world) {
  const std::string& dir = o.resume;
  const bool plain = exists(checkpoint_path(dir)), outer = exists(checkpoint_path(dir, kOuterFile));
  if (!diloco_on(o) && !plain && outer)
    throw TrainError(dir + " holds a DiLoCo checkpoint (" + kOuterFile +
                     ", island-*/): continue it with the --diloco-h and --islands it was written with");
  if (diloco_on(o) && plain && !outer)
    throw TrainError(dir + " holds a checkpoint written without --diloco-h: it has no outer state or island replicas");
  return replica_dir(o, dir, rank, world);
}

Group make_group(const Options& o, strata::Comm world) {
  if (!diloco_on(o)) return Group(world);
  // The outer sync sees the hierarchy of a shard's ranks only (nodes): the job's upper
  // levels (STRATA_HIERARCHY's racks, islands) are checked here, on every rank alike. A
  // level of one group has no slow link to respect.
  const std::vector<strata::HierarchyLevel> levels = world.hierarchy();
  if (!levels.empty() && *std::max_element(levels.back().group.begin(), levels.back().group.end()) > 0) {
    const std::vector<int>& top = levels.back().group;
    for (int r = 1; r < world.size(); ++r)
      if (top[r] == top[r - 1] && island_of(o, r, world.size()) != island_of(o, r - 1, world.size()))
        throw TrainError("--islands " + std::to_string(o.outer.islands) +
                         " would split a group of the hierarchy's "
                         "outermost level (" +
                         levels.back().name + "), ranks " + std::to_string(r - 1) + " and " + std::to_string(r) +
                         ": an island must be a union of them");
  }
  return Group(world.split(island_of(o, world.rank(), world.size()), world.rank()));
}

std::unique_ptr<CheckpointReader> open_outer(const std::string& dir, const CheckpointHeader& replica) {
  auto r = std::make_unique<CheckpointReader>(dir, kOuterFile, kOuterSections);
  if (r->header().step != replica.step || r->header().num_params != replica.num_params)
    throw TrainError("the DiLoCo checkpoint in " + dir + " is inconsistent: " + kOuterFile + " is at step " +
                     std::to_string(r->header().step) + ", this island's replica at step " +
                     std::to_string(replica.step) + " (was a save interrupted?)");
  return r;
}

Diloco::Diloco(const Options& o, strata::Comm job, Trainer& trainer, ParallelGroups& groups)
    : o_(o),
      job_(job),
      started_as_(job.rank()),
      island_(island_of(o, job.rank(), job.size())),
      shard_id_(shard_id(o, groups)) {
  connect(trainer);
}

int Diloco::shard_id(const Options& o, ParallelGroups& groups) {
  const int dp = o.zero == 3 ? groups.coord(kDp) : 0;  // ZeRO-3: each data-parallel rank its own shard
  return groups.coord(kTp) + o.tp * (groups.coord(kPp) + o.pp * dp);
}

void Diloco::pull(Trainer& trainer) {
  if (!staged_.empty()) trainer.kernels().download(staged_.data(), trainer.params(), staged_.size() * sizeof(float));
}

void Diloco::push(Trainer& trainer) {
  if (!staged_.empty()) trainer.kernels().upload(trainer.params(), staged_.data(), staged_.size() * sizeof(float));
}

void Diloco::connect(Trainer& trainer) {
  shard_ = job_.split(shard_id_, started_as_);
  if (trainer.kernels().stream()) staged_.assign(trainer.param_count(), 0.0f);
  pull(trainer);
  outer_ = strata::OuterSync(shard_, outer_params(trainer), trainer.param_count(), o_.outer, layer_segments(trainer));
}

void Diloco::after_step(Trainer& trainer) {
  const bool touches = outer_.next_step_touches_params();
  if (touches) pull(trainer);
  between_islands([&] { outer_.step(); });
  if (touches) push(trainer);
  if (o_.on_failure == "continue" && trainer.step() % o_.diloco_h == 0) keep(trainer);
}

double Diloco::evaluate(Trainer& trainer) {
  const size_t n = trainer.param_count();
  float* params = outer_params(trainer);
  pull(trainer);
  std::vector<float> local(params, params + n);
  between_islands([&] { outer_.global_params(params); });
  push(trainer);
  const double loss = trainer.evaluate();
  std::copy(local.begin(), local.end(), params);
  push(trainer);
  return loss;
}

void Diloco::save(const std::string& dir, Trainer& trainer) {
  trainer.save(replica_dir(o_, dir, job_.rank(), job_.size()));
  const ParamLayout& lay = trainer.layout();
  std::vector<float> snapshot(trainer.param_count()), momentum(trainer.param_count());
  between_islands([&] { outer_.save_state(snapshot.data(), momentum.data()); });
  // Every island holds the same outer state: island 0 gathers it, its rank 0 (the job's) writes.
  if (island_ == 0) {
    std::unique_ptr<CheckpointWriter> w;
    if (job_.rank() == 0) w = std::make_unique<CheckpointWriter>(dir, kOuterFile);
    for (const float* v : {snapshot.data(), momentum.data()})
      trainer.gather_whole(v, trainer.sharded(),
                           [&](int id, const float* whole) { w->append(whole, lay.tensor(id).full_size); });
    if (w) w->commit(trainer.checkpoint_header());
  }
  between_islands([&] { job_.barrier(); });  // every island's file and outer.bin are in place
}

void Diloco::load(const CheckpointReader& outer, const Trainer& trainer) {
  std::vector<float> snapshot(trainer.param_count()), momentum(trainer.param_count());
  for (auto [s, v] : {std::pair{OuterSection::snapshot, &snapshot}, std::pair{OuterSection::momentum, &momentum}})
    trainer.fill(trainer.pieces_of([&, s = s](size_t first, size_t k, float* out) { outer.read(s, first, k, out); }),
                 v->data(), trainer.sharded());
  outer_.load_state(snapshot.data(), momentum.data(), static_cast<long long>(outer.header().step));
}

void Diloco::finish(Trainer& trainer) {
  pull(trainer);
  between_islands([&] {
    outer_.finish();
    outer_.global_params(outer_params(trainer));
  });
  push(trainer);
}

void Diloco::close() {
  outer_ = strata::OuterSync();
  shard_.destroy();
  job_.destroy();
}

std::string Diloco::describe() const {
  const OuterSyncConfig& c = o_.outer;
  char b[512];
  const int shards = o_.tp * o_.pp;
  std::snprintf(
      b, sizeof b,
      "DiLoCo: %d islands of %d ranks | %d shard%s (tp x pp), each synced over its %d ranks in every island | "
      "H %d | outer lr %g momentum %g%s | %s between islands, %s per rank per sync (rank %d) | fragments %d, "
      "overlap %d, mix %g\n",
      outer_.islands(), job_.size() / outer_.islands(), shards, shards > 1 ? "s" : "", outer_.island_size(),
      o_.diloco_h, c.lr, c.momentum, c.nesterov ? " Nesterov" : "", strata::name(c.format),
      mb(static_cast<double>(outer_.bytes_per_sync())).c_str(), job_.rank(), c.fragments, c.overlap, c.mix);
  return b;
}

void Diloco::retire_outer(bool failed) {
  if (!outer_.valid()) return;
  earlier_ = stats();
  if (failed) outer_.abort();
  else outer_ = strata::OuterSync();
}

OuterSyncStats Diloco::stats() const {
  OuterSyncStats s = earlier_;
  if (!outer_.valid()) return s;
  const OuterSyncStats now = outer_.stats();
  s.exchanges += now.exchanges;
  s.bytes_sent += now.bytes_sent;
  s.exposed_s += now.exposed_s;
  return s;
}

std::string Diloco::progress() const {
  const OuterSyncStats s = stats();
  char b[96];
  std::snprintf(b, sizeof b, "outer sent %s, wait %.2f s", mb(static_cast<double>(s.bytes_sent)).c_str(), s.exposed_s);
  return b;
}

std::string Diloco::summary() {
  const OuterSyncStats s = stats();
  uint64_t all = s.bytes_sent;
  between_islands([&] { job_.all_reduce(&all, &all, 1, strata::DataType::uint64, strata::ReduceOp::sum); });
  const double outer_steps = static_cast<double>(s.exchanges) / o_.outer.fragments;
  char b[256];
  std::snprintf(b, sizeof b,
                "outer sync: %.0f outer steps (%llu fragment exchanges) | %s sent across islands by this rank, %s by "
                "all %d | exposed %.2f s (%.1f ms per outer step)\n",
                outer_steps, static_cast<unsigned long long>(s.exchanges),
                mb(static_cast<double>(s.bytes_sent)).c_str(), mb(static_cast<double>(all)).c_str(), job_.size(),
                s.exposed_s, outer_steps > 0 ? s.exposed_s / outer_steps * 1e3 : 0.0);
  return b;
}

}  // namespace strata::train
