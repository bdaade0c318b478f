#include "diloco.hpp"

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "errors.hpp"

namespace strata::train {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Layer groups in buffer order, as segment lengths: the embeddings, each block, the final
// LayerNorm (padding belongs to the group before it).
std::vector<size_t> layer_segments(const ParamLayout& lay) {
  const ModelConfig& c = lay.config();
  std::vector<size_t> starts{lay.tensor(tensor_wte()).offset};
  for (int l = 0; l < c.layers; ++l) starts.push_back(lay.tensor(tensor_layer(l, kLn1W)).offset);
  starts.push_back(lay.tensor(tensor_lnf_w(c)).offset);
  starts.push_back(lay.padded_size());
  std::vector<size_t> segs;
  for (size_t i = 0; i + 1 < starts.size(); ++i) segs.push_back(starts[i + 1] - starts[i]);
  return segs;
}

}  // namespace

void validate_diloco(Options& o, int world, bool launched) {
  if (!diloco_on(o)) {
    if (!o.diloco_flag.empty())
      throw TrainError(o.diloco_flag + " is a DiLoCo option: it needs --diloco-h H (inner steps between outer syncs)");
    return;
  }
  const int H = o.diloco_h, K = o.outer.islands;
  if (!launched) throw TrainError("--diloco-h needs a job of several ranks: start it with strata-run -n N");
  if (K == 0)
    throw TrainError("--diloco-h needs --islands K: the number of islands, the groups of the hierarchy's outermost "
                     "level (e.g. strata-run --hosts K)");
  if (o.tp * o.pp > 1)
    throw TrainError("--diloco-h runs data parallel (or ZeRO) inside each island: it does not combine with --tp or "
                     "--pp yet");
  if (world % K != 0)
    throw TrainError("--islands " + std::to_string(K) + " does not divide the " + std::to_string(world) +
                     " ranks into equal islands");
  const int groups = o.model.layers + 2;
  if (o.outer.fragments > groups)
    throw TrainError("--fragments " + std::to_string(o.outer.fragments) + " but the model has " +
                     std::to_string(groups) + " layer groups (embeddings, " + std::to_string(o.model.layers) +
                     " blocks, final LayerNorm)");
  if (o.outer.fragments > H)
    throw TrainError("--fragments " + std::to_string(o.outer.fragments) + " is more than --diloco-h " +
                     std::to_string(H) + ": at most one fragment starts per step");
  if (o.outer.overlap >= H)
    throw TrainError("--overlap " + std::to_string(o.outer.overlap) + " must be below --diloco-h " +
                     std::to_string(H) + ": a fragment is applied before its next sync");
  o.outer.every = H;
}

std::string replica_dir(const Options& o, const std::string& dir, int rank, int world) {
  if (!diloco_on(o)) return dir;
  return dir + "/island-" + std::to_string(rank / (world / o.outer.islands));
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
  const int island = world.rank() / (world.size() / o.outer.islands);
  return Group(world.split(island, world.rank()));
}

std::unique_ptr<CheckpointReader> open_outer(const std::string& dir, const CheckpointHeader& replica) {
  auto r = std::make_unique<CheckpointReader>(dir, kOuterFile, kOuterSections);
  if (r->header().step != replica.step || r->header().num_params != replica.num_params)
    throw TrainError("the DiLoCo checkpoint in " + dir + " is inconsistent: " + kOuterFile + " is at step " +
                     std::to_string(r->header().step) + ", this island's replica at step " +
                     std::to_string(replica.step) + " (was a save interrupted?)");
  return r;
}

Diloco::Diloco(const Options& o, strata::Comm world, Trainer& trainer)
    : o_(o),
      world_(world),
      outer_(world, trainer.params(), trainer.layout().padded_size(), o.outer, layer_segments(trainer.layout())) {}

double Diloco::evaluate(Trainer& trainer) {
  const size_t n = trainer.layout().padded_size();
  std::vector<float> local(trainer.params(), trainer.params() + n);
  outer_.global_params(trainer.params());
  const double loss = trainer.evaluate();
  std::copy(local.begin(), local.end(), trainer.params());
  return loss;
}

void Diloco::save(const std::string& dir, Trainer& trainer) {
  trainer.save(replica_dir(o_, dir, world_.rank(), world_.size()));
  const ParamLayout& lay = trainer.layout();
  std::vector<float> snapshot(lay.padded_size()), momentum(lay.padded_size());
  outer_.save_state(snapshot.data(), momentum.data());
  if (world_.rank() == 0) {
    CheckpointWriter w(dir, kOuterFile);
    std::vector<float> canon(lay.num_params());
    for (const std::vector<float>* v : {&snapshot, &momentum}) {
      flat_to_canonical(lay, v->data(), canon.data());
      w.append(canon.data(), canon.size());
    }
    w.commit(trainer.checkpoint_header());
  }
  world_.barrier();  // every island's file and outer.bin are in place
}

void Diloco::load(const CheckpointReader& outer, const Trainer& trainer) {
  const ParamLayout& lay = trainer.layout();
  std::vector<float> canon(lay.num_params()), snapshot(lay.padded_size(), 0.0f), momentum(lay.padded_size(), 0.0f);
  outer.read(OuterSection::snapshot, 0, canon.size(), canon.data());
  canonical_to_flat(lay, canon.data(), snapshot.data());
  outer.read(OuterSection::momentum, 0, canon.size(), canon.data());
  canonical_to_flat(lay, canon.data(), momentum.data());
  outer_.load_state(snapshot.data(), momentum.data(), static_cast<long long>(outer.header().step));
}

void Diloco::finish(Trainer& trainer) {
  outer_.finish();
  outer_.global_params(trainer.params());
}

void Diloco::close() {
  outer_ = strata::OuterSync();
  world_.destroy();
}

std::string Diloco::describe() const {
  const OuterSyncConfig& c = o_.outer;
  char b[512];
  std::snprintf(b, sizeof b,
                "DiLoCo: %d islands of %d ranks | H %d | outer lr %g momentum %g%s | %s between islands, %s per "
                "rank per sync | fragments %d, overlap %d, mix %g\n",
                outer_.islands(), outer_.island_size(), o_.diloco_h, c.lr, c.momentum, c.nesterov ? " Nesterov" : "",
                strata::name(c.format), mb(static_cast<double>(outer_.bytes_per_sync())).c_str(), c.fragments,
                c.overlap, c.mix);
  return b;
}

std::string Diloco::progress() const {
  const OuterSyncStats s = outer_.stats();
  char b[96];
  std::snprintf(b, sizeof b, "outer sent %s, wait %.2f s", mb(static_cast<double>(s.bytes_sent)).c_str(),
                s.exposed_s);
  return b;
}

std::string Diloco::summary() const {
  const OuterSyncStats s = outer_.stats();
  const double outer_steps = static_cast<double>(s.exchanges) / o_.outer.fragments;
  char b[256];
  std::snprintf(b, sizeof b,
                "outer sync: %.0f outer steps (%llu fragment exchanges) | %s sent across islands by this rank, %s by "
                "all %d | exposed %.2f s (%.1f ms per outer step)\n",
                outer_steps, static_cast<unsigned long long>(s.exchanges),
                mb(static_cast<double>(s.bytes_sent)).c_str(),
                mb(static_cast<double>(s.bytes_sent) * world_.size()).c_str(), world_.size(), s.exposed_s,
                outer_steps > 0 ? s.exposed_s / outer_steps * 1e3 : 0.0);
  return b;
}

}  // namespace strata::train
