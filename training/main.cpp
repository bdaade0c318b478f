// strata-train: trains the reference GPT on a text file, alone or over tp x pp x dp ranks
// under a launcher. Rank 0 prints; every rank prints its parameter checksum at the end so
// that a test (or a person) can see that the replicas agree.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <strata/strata.hpp>
#include <algorithm>
#include <string>
#include <thread>

#include "checkpoint.hpp"
#include "data.hpp"
#include "device/choose.hpp"
#include "device/mfu.hpp"
#include "diloco.hpp"
#include "errors.hpp"
#include "group.hpp"
#include "kernels.hpp"
#include "options.hpp"
#include "parallel_groups.hpp"
#include "relayout.hpp"
#include "traffic.hpp"
#include "trainer.hpp"

namespace st = strata::train;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration_text(double s) {
  char b[32];
  long t = std::lround(s);
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%lds", t);
  return b;
}

std::string fixed1(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", x);
  return b;
}

// Control characters other than newline and tab would garble a terminal.
std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) o.push_back(c == '\n' || c == '\t' || (c >= 32 && c < 127) ? c : '?');
  return o;
}

// --save DIR must be usable before training starts, not discovered after an hour.
void check_save_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw st::TrainError("--save " + dir + " exists and is not a directory");
}

int run(int argc, char** argv) {
  st::Options o;
  try {
    o = st::parse_options(argc, argv);
  } catch (const st::TrainError& e) {
    throw st::TrainError(std::string(e.what()) + " (strata-train --help lists the options)");
  }
  if (o.help) {
    std::fputs(st::usage_text().c_str(), stdout);
    return 0;
  }
  // Started by a launcher (strata-run, torchrun, mpirun, srun) or as a single process.
  const strata::LaunchInfo launch = strata::launch_info();
  const bool launched = !launch.launcher.empty();
  const int world = launch.size, rank = launch.rank;
  // Everything the user can get wrong is checked before joining the job and before any
  // file is written.
  st::validate_options(o, world, launched);
  st::TokenData data = st::TokenData::load(o.data, o.val_data, o.model.ctx, o.model.vocab);
  const st::Kernels& kernels = st::kernels_for(o.device, o.precision == "bf16");
  const st::DeviceReport device(o);
  std::optional<st::CheckpointReader> ckpt;
  std::unique_ptr<st::CheckpointReader> outer_ckpt;
  if (!o.resume.empty()) {
    ckpt.emplace(st::resume_dir(o, rank, world));
    st::check_checkpoint_matches(ckpt->header(), o);
    if (st::diloco_on(o)) outer_ckpt = st::open_outer(o.resume, ckpt->header());
  }
  if (!o.save.empty()) check_save_dir(o.save);

  // With DiLoCo the trainer's groups live inside this rank's island, which takes its
  // share of the global batch; the job's communicator serves the outer exchange.
  // A replacement for a rank of a lost island (--join) waits until the islands left take it
  // in (island_heal.cpp); its rank in the job it joins may differ from its launcher's.
  strata::Comm job;
  st::Group replica;
  st::Welcome welcome;
  if (launched && o.join) {
    job = strata::Comm::join_from_env(rank);
    welcome = st::meet(o, job, rank, true);
    replica = welcome.island;
  } else if (launched) {
    job = strata::Comm::init_from_env();
    replica = st::make_group(o, job);
  }
  const int job_rank = launched ? job.rank() : 0, job_size = launched ? job.size() : 1;
  std::unique_ptr<st::ParallelGroups> groups = st::make_groups(o, replica, st::first_slice(o, job_rank, job_size));
  bool root = job_rank == 0;  // the rank that prints: rank 0 of the survivors after a shrink
  int threads = o.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency() / world);
  st::set_blas_threads(threads);

  auto trainer = std::make_unique<st::Trainer>(o, *groups, data, kernels);
  std::unique_ptr<st::Diloco> diloco;
  if (st::diloco_on(o))
    diloco = o.join ? std::make_unique<st::Diloco>(o, job, *trainer, *groups, welcome)
                    : std::make_unique<st::Diloco>(o, job, *trainer, *groups);
  if (ckpt) {
    trainer->load(*ckpt);
    if (diloco) diloco->load(*outer_ckpt, *trainer);
    if (root) {
      const st::CheckpointHeader& h = ckpt->header();
      std::printf("resumed from %s at step %d\n", ckpt->path().c_str(), trainer->step());
      // Allowed, but then the data order is not the one the first run would have seen.
      if (h.batch != static_cast<uint32_t>(o.batch))
        std::printf("note: the checkpoint was written with --batch %u, this run uses %d\n", h.batch,
                    o.batch);
    }
    ckpt.reset();
  }
  if (diloco && o.on_failure == "continue" && !o.join) diloco->keep(*trainer);  // where the islands go back to
  // --on-failure shrink: when a rank fails, the survivors go on without it (a failure
  // otherwise ends the run). Runs `work`; false when it failed and the survivors shrank.
  bool shrunk = false;
  bool leaves = false;  // this rank is not needed by the layout the survivors chose
  int settled = trainer->step();  // the last step whose evaluation and saving are done
  int door_checked = o.join ? trainer->step() : -1;  // the last step replacements were looked for
  auto survive = [&](const std::function<void()>& work) {
    try {
      work();
      return true;
    } catch (const st::OuterFailure& failure) {  // between islands: DiLoCo, --on-failure continue
      if (o.on_failure != "continue") throw;
      const double t0 = now_s();
      const int at = trainer->step();
      const int islands = o.outer.islands;
      st::Diloco::IslandLoss loss;
      try {
        loss = diloco->go_on_without_lost_islands(o, *trainer, *groups);
      } catch (const strata::PeerError& e) {
        throw st::TrainError(std::string("the other islands went on without this one: it stops (") + e.what() + ")");
      }
      if (!loss.stays) throw st::TrainError(loss.why + ": it stops, and the whole islands go on without it");
      shrunk = true;
      root = diloco->job_rank() == 0;
      // Every island left is at the outer step it went back to, whether or not it had passed
      // it before: the step is settled, and the door (just opened) is looked at from the next.
      settled = door_checked = trainer->step();
      std::string lost, dead, caught_up;
      for (int k : loss.lost) lost += (lost.empty() ? "" : ", ") + std::to_string(k);
      for (int x : loss.dead) dead += (dead.empty() ? "" : ", ") + std::to_string(x);
      for (int k : loss.caught_up) caught_up += " " + std::to_string(k);
      if (!caught_up.empty())
        caught_up = "; island" + caught_up + " (as numbered now) missed the end of that exchange and took its result";
      if (root)
        std::printf("step %5d: island%s %s of %d stopped (rank%s %s gone); %d islands go on from the outer step of "
                    "step %d (steps %d-%d lost)%s with the global batch of %d | %.2f s | the failure: %s\n",
                    at, loss.lost.size() > 1 ? "s" : "", lost.c_str(), islands, loss.dead.size() > 1 ? "s" : "",
                    dead.c_str(), loss.islands, loss.step, loss.step + 1, at, caught_up.c_str(), o.batch,
                    now_s() - t0, failure.what());
      return false;
    } catch (const strata::PeerError& peer) {  // a rank died or stopped (TimeoutError too)
      if (o.on_failure == "continue")  // inside this rank's island
        throw st::TrainError("island " + std::to_string(st::island_of(o, rank, world)) + " lost a rank (" +
                             peer.what() + "): it stops, and the other islands go on without it");
      if (o.on_failure != "shrink") throw;
      const double t0 = now_s();
      const int at = trainer->step() + 1;
      shrunk = true;
      if (st::state_dies_with_a_rank(o)) {  // back to the last checkpoint, on fewer ranks
        st::Relayout r = st::relayout_after_failure(o, *groups);
        trainer.reset();
        groups->destroy();
        groups.reset();
        if (!r.stays) {
          std::printf("rank %d: not needed by the layout the %d survivors go on with; it leaves\n", rank,
                      r.survivors);
          leaves = true;
          return false;
        }
        groups = st::make_groups(o, r.world, 0);
        trainer = std::make_unique<st::Trainer>(o, *groups, data, kernels);
        if (r.checkpoint_step > 0) trainer->load(st::CheckpointReader(r.checkpoint_dir));
        settled = trainer->step();
        root = groups->world().rank() == 0;
        if (root)
          std::printf("step %5d: %s failed; %d ranks left, %d go on as tp %d x pp %d x dp %d from %s, losing %s | "
                      "%.2f s\n",
                      at, r.lost_text().c_str(), r.survivors, groups->world().size(), o.tp, o.pp, o.dp,
                      r.checkpoint_step > 0
                          ? ("the checkpoint of step " + std::to_string(r.checkpoint_step) + " in " + r.checkpoint_dir)
                                .c_str()
                          : "the initial model (no checkpoint yet)",
                      at - 1 > r.checkpoint_step ? ("steps " + std::to_string(r.checkpoint_step + 1) + "-" +
                                                    std::to_string(at - 1) + " (" +
                                                    std::to_string(at - 1 - r.checkpoint_step) + ")").c_str()
                                                 : "no step",
                      now_s() - t0);
        return false;
      }
      const st::Trainer::Recovery rec = trainer->go_on_after_failure();
      root = groups->world().rank() == 0;
      // A rank may have settled a step the others did not reach: all settle from the least.
      float mine = static_cast<float>(settled), least = 0;
      groups->world().all_reduce(&mine, &least, 1, strata::ReduceOp::min).wait();
      settled = static_cast<int>(least);
      if (root)
        std::printf("step %5d: rank %d failed; %d ranks go on from step %d after %.2f s with the global batch of %d: "
                    "its %d slices of %d sequences dealt in turn, %zu on rank 0 (more accumulation microbatches)%s\n",
                    at, peer.peer(), rec.ranks, rec.step + 1, now_s() - t0, o.batch, o.dp, o.batch / o.dp,
                    rec.slices.size(),
                    rec.ahead < 0 ? "" : ("; rank " + std::to_string(rec.ahead) + " of them had completed step " +
                                          std::to_string(rec.step) + ", and the others took its state").c_str());
      return false;
    }
  };
  const int stop = o.stop_at ? o.stop_at : o.steps;
  if (root) {
    const st::ParamLayout& lay = trainer->layout();
    std::printf(
        "strata-train: %d layers, %d heads, dim %d, ctx %d, vocab %d | %zu parameters "
        "(%zu padded, %zu buckets)\n",
        o.model.layers, o.model.heads, o.model.dim, o.model.ctx, o.model.vocab, lay.num_params(),
        lay.padded_size(), lay.buckets().size());
    std::printf(
        "data %s: %zu %s (train %zu, val %zu) | batch %d = %d ranks x %d, %d tokens "
        "per step | zero %d, gradients reduced in %s | %d BLAS threads per rank\n",
        data.path().c_str(), data.size(), data.shards() ? "tokens" : "bytes", data.train_size(), data.val_size(),
        o.batch, o.dp, o.batch / o.dp, o.batch * o.model.ctx, o.zero, o.grad_dtype.c_str(), threads);
    if (o.zero == 3 || o.recompute)
      std::printf("%s%s%s\n",
                  o.zero == 3 ? ("zero 3: parameters sharded over the " + std::to_string(groups->size(st::kDp)) +
                                 " data-parallel ranks, each layer group all-gathered when used, " +
                                 std::to_string(o.prefetch) + " ahead (--prefetch)")
                                    .c_str()
                              : "",
                  o.zero == 3 && o.recompute ? " | " : "",
                  o.recompute ? "recompute block: each block's forward again in backward" : "");
    if (world > 1) std::fputs(groups->grid().describe().c_str(), stdout);
    if (o.tp > 1)
      std::printf("tensor parallel: %d ranks, %d heads and %d vocabulary entries each%s\n", o.tp,
                  o.model.heads / o.tp, o.model.vocab / o.tp,
                  o.sequence_parallel ? ", sequence parallel (LayerNorm and residual on 1/tp of the rows)" : "");
    if (o.pp > 1 || o.microbatches > 1)
      std::printf("pipeline: %s schedule, %d microbatches of %d sequences | %s | bubble formula %.3f\n",
                  o.schedule.c_str(), o.microbatches, o.batch / o.dp / o.microbatches,
                  st::describe_stages(o.model.layers, o.pp, o.virtual_stages).c_str(),
                  st::bubble_formula(*st::parse_schedule(o.schedule), o.pp, o.virtual_stages,
                                     o.microbatches));
    std::printf("steps %d | lr %g, warmup %d, cosine to %g | wd %g | clip %g | seed %llu\n",
                o.steps, o.lr, o.warmup, o.lr * 0.1, o.wd, o.clip,
                static_cast<unsigned long long>(o.seed));
    std::fputs(device.banner().c_str(), stdout);
    std::fputs(trainer->memory_report().c_str(), stdout);
    if (diloco) std::fputs(diloco->describe().c_str(), stdout);
  }

  const double tokens = static_cast<double>(o.batch) * o.model.ctx;
  const int first = trainer->step() + 1;
  double t_start = now_s(), last_val = NAN;
  auto do_eval = [&] {
    if (o.eval_batches == 0) return;
    double t0 = now_s();
    last_val = diloco ? diloco->evaluate(*trainer) : trainer->evaluate();
    if (root)
      std::printf("step %5d | val loss %.6f | %d batches | %.2f s\n", trainer->step(), last_val,
                  o.eval_batches, now_s() - t0);
  };
  // The split of step time is averaged from the second step on when there is one: the
  // first also allocates the microbatches' activations and warms the caches.
  double last_loss = NAN, comm_wait = 0, idle = 0, gather = 0, busy = 0;
  int timed = 0, timed_from = 0;
  st::Traffic traffic{};
  // Evaluation and saving due after step s; false when a failure interrupted them and the
  // survivors shrank.
  auto end_of_step = [&](int s) {
    if (((o.eval_every > 0 && s % o.eval_every == 0) || s == o.steps) && !survive(do_eval)) return false;
    if (!o.save.empty() && ((o.save_every > 0 && s % o.save_every == 0) || s == stop)) {
      if (!survive([&] { diloco ? diloco->save(o.save, *trainer) : trainer->save(o.save); })) return false;
      if (root) std::printf("saved %s at step %d\n", (diloco ? o.save : st::checkpoint_path(o.save)).c_str(), s);
    }
    return true;
  };
  for (;;) {
    if (leaves) return 0;
    // After a shrink every survivor comes back here, at one step and one `settled`: the
    // evaluation and saving of a step whose training some rank completed are done (again)
    // by all, before the next step.
    if (settled < trainer->step()) {
      if (!end_of_step(trainer->step())) continue;
      settled = trainer->step();
    }
    // Islands left after a loss take replacements back at an outer step (island_heal.cpp);
    // a replacement starts at the step it was taken back at.
    if (diloco && o.on_failure == "continue" && trainer->step() % o.diloco_h == 0 && trainer->step() < stop &&
        trainer->step() != door_checked) {
      const int s = door_checked = trainer->step();
      int waiting = 0;
      if (!survive([&] { waiting = diloco->newcomers(); })) continue;
      const int island = groups->world().size();
      if (waiting >= island) {
        st::Diloco::Healing h;
        if (!survive([&] { h = diloco->take_back(o, *trainer, *groups, waiting - waiting % island); })) continue;
        root = diloco->job_rank() == 0;
        std::string back;
        for (int k : h.islands) back += (back.empty() ? "" : ", ") + std::to_string(k);
        if (root && h.healed)
          std::printf("step %5d: island%s %s came back and took island %d's state (%s in %.2f s); %d islands go on "
                      "with the global batch of %d\n",
                      s, h.islands.size() > 1 ? "s" : "", back.c_str(), h.donor,
                      st::mb(static_cast<double>(h.bytes)).c_str(), h.seconds, o.outer.islands, o.batch);
        if (root && !h.healed)
          std::printf("step %5d: %d replacement ranks wait, but taking them in failed: %s\n", s, waiting,
                      h.why.c_str());
      }
    }
    if (trainer->step() >= stop) break;
    double t0 = now_s();
    st::StepResult r;
    if (!survive([&] {
          r = trainer->train_step();
          if (diloco) diloco->after_step(*trainer);
        }))
      continue;
    double dt = now_s() - t0;
    last_loss = r.loss;
    if (trainer->step() > first || stop == first) {
      if (timed++ == 0) timed_from = trainer->step();
      comm_wait += r.comm_wait_s;
      idle += r.idle_s;
      gather += r.gather_s;
      busy += r.time_s;
    }
    for (size_t i = 0; i < traffic.size(); ++i) traffic[i] += static_cast<double>(r.bytes[i]);
    if (!std::isfinite(r.loss))
      throw st::TrainError("loss is " + std::to_string(r.loss) + " at step " +
                           std::to_string(trainer->step()) + "; try a smaller --lr");
    const int s = trainer->step();
    if (root && (s % o.log_every == 0 || s == stop)) {
      double avg = (now_s() - t_start) / std::max(1, s - first + 1);  // s < first after going back to a checkpoint
      std::printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %8.0f tok/s | %7.1f ms", s,
                  o.steps, r.loss, r.lr, r.grad_norm, tokens / dt, dt * 1e3);
      if (world > 1)
        std::printf(" (compute %.1f, comm %.1f, idle %.1f%s)",
                    (r.time_s - r.comm_wait_s - r.idle_s - r.gather_s) * 1e3, r.comm_wait_s * 1e3, r.idle_s * 1e3,
                    o.zero == 3 ? (", gather " + fixed1(r.gather_s * 1e3)).c_str() : "");
      if (diloco) std::printf(" | %s", diloco->progress().c_str());
      std::printf("%s | ETA %s\n", device.step(tokens / dt).c_str(), duration_text(avg * (stop - s)).c_str());
    }
  }
  if (diloco && trainer->step() == o.steps) diloco->finish(*trainer);  // the replicas adopt the global model
  double elapsed = now_s() - t_start;
  int ran = trainer->step() - first + 1;
  const std::string outer_summary = diloco ? diloco->summary() : "";  // collective
  if (root) {
    std::printf("done: steps %d..%d in %.1f s (%.1f ms/step, %.0f tok/s) | last loss %.6f", first,
                trainer->step(), elapsed, ran > 0 ? elapsed / ran * 1e3 : 0.0,
                ran > 0 ? tokens * ran / elapsed : 0.0, last_loss);
    if (!std::isnan(last_val)) std::printf(" | val loss %.6f", last_val);
    if (world > 1 && timed > 0)
      std::printf(" | per step from step %d: compute %.1f, comm %.1f, idle %.1f%s ms", timed_from,
                  (busy - comm_wait - idle - gather) / timed * 1e3, comm_wait / timed * 1e3, idle / timed * 1e3,
                  o.zero == 3 ? (", gather " + fixed1(gather / timed * 1e3)).c_str() : "");
    std::printf("\n");
    if (diloco) {
      std::fputs(outer_summary.c_str(), stdout);
    } else if (world > 1 && ran > 0 && !shrunk) {  // the formula is for one shape of the job
      for (double& t : traffic) t /= ran;
      std::fputs(st::traffic_report(o, trainer->layout(), groups->coord(st::kPp), groups->dp_is_world(), traffic).c_str(), stdout);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak RSS rank 0: %.1f MB", ru.ru_maxrss / 1024.0);
    if (o.zero >= 2) std::printf(" | gradient staging peak: %d buckets", trainer->staging_peak());
    if (o.zero == 3 && ran > 0)
      std::printf(" | zero 3: %llu layer-group gathers (evaluation included), %d gathered at most at once",
                  static_cast<unsigned long long>(trainer->gathers()), trainer->gathered_buffers());
    std::printf("\n");
    if (trainer->step() < o.steps)
      std::printf("stopped at step %d of %d%s\n", trainer->step(), o.steps,
                  o.save.empty() ? "" : ("; continue with --resume " + o.save).c_str());
  }
  if (o.sample_len > 0 && trainer->step() == o.steps) {
    const std::string text = trainer->sample(o.sample_len, o.seed + trainer->step());  // collective
    if (root)
      std::printf("sample (%d %s):\n%s\n", o.sample_len, o.model.vocab == 256 ? "bytes" : "token ids",
                  printable(text).c_str());
  }
  std::printf("rank %d parameter checksum %016llx", rank,
              static_cast<unsigned long long>(trainer->param_checksum()));
  if (groups->model_parallel())
    std::printf(" | tp %d pp %d dp %d | replicated %016llx | peak activations %.2f MB (%d microbatches)"
                " | idle %.1f%% of the step",
                groups->coord(st::kTp), groups->coord(st::kPp), groups->coord(st::kDp),
                static_cast<unsigned long long>(trainer->replicated_checksum()), trainer->activation_bytes() / 1e6,
                trainer->microbatches_in_flight(), busy > 0 ? 100 * idle / busy : 0.0);
  if (groups->model_parallel() && trainer->layout().holds(st::tensor_wte()))  // the two copies must agree
    std::printf(" | tied embedding %016llx", static_cast<unsigned long long>(trainer->embedding_checksum()));
  std::printf("\n");
  std::fflush(stdout);
  groups->destroy();
  if (diloco) diloco->close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // strata-run reads our output through a pipe
  try {
    return run(argc, argv);
  } catch (const st::TrainError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "strata-train: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "strata-train: %s\n", e.what());
    return 1;
  }
}
