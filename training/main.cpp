// strata-train: trains the reference GPT on a text file, alone or over tp x pp x dp ranks
// under a launcher. Rank 0 prints; every rank prints its parameter checksum at the end so
// that a test (or a person) can see that the replicas agree.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <strata/strata.hpp>
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
#include "recovery.hpp"
#include "relayout.hpp"
#include "traffic.hpp"
#include "trainer.hpp"

namespace st = strata::train;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string duration_text(double s) {
  char b[32];
  long t = std::lround(s);
  if (t >= 3600) std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(b, sizeof b, "%lds", t);
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

// What a run is made of, set up by the constructor in this order (the options already
// checked: before joining the job and before any file is written) and torn down in the
// reverse: the trainer and DiLoCo hold references to the options, the data and the groups.
struct Run {
  Run(st::Options& options, const strata::LaunchInfo& launch);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  st::Options& o;
  const bool launched;  // by a launcher (strata-run, torchrun, mpirun, srun), not a single process
  const int world, rank;
  const st::TokenData data;
  const st::Kernels& kernels;
  const st::DeviceReport device;
  std::unique_ptr<st::CheckpointReader> outer_ckpt;  // DiLoCo's outer state, with --resume
  strata::Comm job;
  st::Group replica;
  st::Welcome welcome;
  int threads = 0;  // BLAS threads per rank
  st::RunState state;

 private:
  void join_job();
  void make_trainer();
  void resume(const st::CheckpointReader& ckpt);
};

Run::Run(st::Options& options, const strata::LaunchInfo& launch)
    : o(options),
      launched(!launch.launcher.empty()),
      world(launch.size),
      rank(launch.rank),
      data(st::TokenData::load(o.data, o.val_data, o.model.ctx, o.model.vocab)),
      kernels(st::kernels_for(o.device, o.precision == "bf16")),
      device(o) {
  std::optional<st::CheckpointReader> ckpt;
  if (!o.resume.empty()) {
    ckpt.emplace(st::resume_dir(o, rank, world));
    st::check_checkpoint_matches(ckpt->header(), o);
    if (st::diloco_on(o)) outer_ckpt = st::open_outer(o.resume, ckpt->header());
  }
  if (!o.save.empty()) check_save_dir(o.save);
  join_job();
  make_trainer();
  if (ckpt) {
    resume(*ckpt);
    ckpt.reset();
  }
  st::RunState& s = state;
  if (s.diloco && o.on_failure == "continue" && !o.join) s.diloco->keep(*s.trainer);  // where the islands go back to
  s.settled = s.trainer->step();
  s.door_checked = o.join ? s.trainer->step() : -1;
}

// With DiLoCo the trainer's groups live inside this rank's island, which takes its share
// of the global batch; the job's communicator serves the outer exchange. A replacement
// for a rank of a lost island (--join) waits until the islands left take it in
// (island_heal.cpp); its rank in the job it joins may differ from its launcher's.
void Run::join_job() {
  if (launched && o.join) {
    job = strata::Comm::join_from_env(rank);
    welcome = st::meet(o, job, rank, true);
    replica = welcome.island;
  } else if (launched) {
    job = strata::Comm::init_from_env();
    replica = st::make_group(o, job);
  }
  const int job_rank = launched ? job.rank() : 0, job_size = launched ? job.size() : 1;
  state.groups = st::make_groups(o, replica, st::first_slice(o, job_rank, job_size));
  state.root = job_rank == 0;
  threads = o.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency() / world);
  st::set_blas_threads(threads);
}

void Run::make_trainer() {
  st::RunState& s = state;
  s.trainer = std::make_unique<st::Trainer>(o, *s.groups, data, kernels);
  if (st::diloco_on(o))
    s.diloco = o.join ? std::make_unique<st::Diloco>(o, job, *s.trainer, *s.groups, welcome)
                      : std::make_unique<st::Diloco>(o, job, *s.trainer, *s.groups);
}

void Run::resume(const st::CheckpointReader& ckpt) {
  st::RunState& s = state;
  s.trainer->load(ckpt);
  if (s.diloco) s.diloco->load(*outer_ckpt, *s.trainer);
  if (s.root) {
    const st::CheckpointHeader& h = ckpt.header();
    std::printf("resumed from %s at step %d\n", ckpt.path().c_str(), s.trainer->step());
    // Allowed, but then the data order is not the one the first run would have seen.
    if (h.batch != static_cast<uint32_t>(o.batch))
      std::printf("note: the checkpoint was written with --batch %u, this run uses %d\n", h.batch, o.batch);
  }
}

// What rank 0 prints before the first step: the model, the data, the layout, the schedule.
void print_banner(const Run& r) {
  const st::Options& o = r.o;
  const st::RunState& s = r.state;
  const st::ParamLayout& lay = s.trainer->layout();
  std::printf("strata-train: %d layers, %d heads, dim %d, ctx %d, vocab %d | %zu parameters "
              "(%zu padded, %zu buckets)\n",
              o.model.layers, o.model.heads, o.model.dim, o.model.ctx, o.model.vocab, lay.num_params(),
              lay.padded_size(), lay.buckets().size());
  std::printf("data %s: %zu %s (train %zu, val %zu) | batch %d = %d ranks x %d, %d tokens "
              "per step | zero %d, gradients reduced in %s | %d BLAS threads per rank\n",
              r.data.path().c_str(), r.data.size(), r.data.shards() ? "tokens" : "bytes", r.data.train_size(),
              r.data.val_size(), o.batch, o.dp, o.batch / o.dp, o.batch * o.model.ctx, o.zero, o.grad_dtype.c_str(),
              r.threads);
  if (o.zero == 3 || o.recompute)
    std::printf("%s%s%s\n",
                o.zero == 3 ? ("zero 3: parameters sharded over the " + std::to_string(s.groups->size(st::kDp)) +
                               " data-parallel ranks, each layer group all-gathered when used, " +
                               std::to_string(o.prefetch) + " ahead (--prefetch)")
                                  .c_str()
                            : "",
                o.zero == 3 && o.recompute ? " | " : "",
                o.recompute ? "recompute block: each block's forward again in backward" : "");
  if (r.world > 1) std::fputs(s.groups->grid().describe().c_str(), stdout);
  if (o.tp > 1)
    std::printf("tensor parallel: %d ranks, %d heads and %d vocabulary entries each%s\n", o.tp, o.model.heads / o.tp,
                o.model.vocab / o.tp,
                o.sequence_parallel ? ", sequence parallel (LayerNorm and residual on 1/tp of the rows)" : "");
  if (o.pp > 1 || o.microbatches > 1)
    std::printf("pipeline: %s schedule, %d microbatches of %d sequences | %s | bubble formula %.3f\n",
                o.schedule.c_str(), o.microbatches, o.batch / o.dp / o.microbatches,
                st::describe_stages(o.model.layers, o.pp, o.virtual_stages).c_str(),
                st::bubble_formula(*st::parse_schedule(o.schedule), o.pp, o.virtual_stages, o.microbatches));
  std::printf("steps %d | lr %g, warmup %d, cosine to %g | wd %g | clip %g | seed %llu\n", o.steps, o.lr, o.warmup,
              o.lr * 0.1, o.wd, o.clip, static_cast<unsigned long long>(o.seed));
  std::fputs(r.device.banner().c_str(), stdout);
  std::fputs(s.trainer->memory_report().c_str(), stdout);
  if (s.diloco) std::fputs(s.diloco->describe().c_str(), stdout);
}

// The training loop: steps, with evaluation and saving where due, through failures that
// --on-failure lets the run survive; then the summary, the sample and the checksums.
class Loop {
 public:
  explicit Loop(Run& r)
      : r_(r),
        o_(r.o),
        s_(r.state),
        recovery_(r.o, r.data, r.kernels, r.rank, r.world),
        stop_(o_.stop_at ? o_.stop_at : o_.steps),
        tokens_(static_cast<double>(o_.batch) * o_.model.ctx),
        first_(s_.trainer->step() + 1),
        t_start_(now_s()) {}

  // Until step --stop-at (or --steps), or until this rank leaves (state.leaves).
  void run();
  // What is printed at the end, when this rank did not leave.
  void finish();

 private:
  // Runs `work` under the recovery policy; false when a failure interrupted it (the
  // survivors shrank, or this rank leaves), after printing what the policy reports.
  bool survive(const std::function<void()>& work);
  void evaluate();
  // Evaluation and saving due after step s; false when a failure interrupted them and the
  // survivors shrank.
  bool end_of_step(int s);
  // Islands left after a loss take replacements back at an outer step (island_heal.cpp);
  // false when a failure interrupted that.
  bool take_back_replacements();
  // One training step, and its line; false when a failure interrupted it.
  bool step();
  void print_summary(double elapsed, int ran, const std::string& outer_summary);

  Run& r_;
  st::Options& o_;
  st::RunState& s_;
  const st::RecoveryPolicy recovery_;
  const int stop_;
  const double tokens_;
  const int first_;
  const double t_start_;
  double last_val_ = NAN;
  // The split of step time is averaged from the second step on when there is one: the
  // first also allocates the microbatches' activations and warms the caches.
  double last_loss_ = NAN, comm_wait_ = 0, idle_ = 0, gather_ = 0, busy_ = 0;
  int timed_ = 0, timed_from_ = 0;
  st::Traffic traffic_{};
};

bool Loop::survive(const std::function<void()>& work) {
  const std::optional<st::RecoveryReport> report = recovery_.run(work, s_);
  if (!report) return true;
  std::fputs(report->line.c_str(), stdout);
  return false;
}

void Loop::evaluate() {
  if (o_.eval_batches == 0) return;
  double t0 = now_s();
  last_val_ = s_.diloco ? s_.diloco->evaluate(*s_.trainer) : s_.trainer->evaluate();
  if (s_.root)
    std::printf("step %5d | val loss %.6f | %d batches | %.2f s\n", s_.trainer->step(), last_val_, o_.eval_batches,
                now_s() - t0);
}

bool Loop::end_of_step(int s) {
  if (((o_.eval_every > 0 && s % o_.eval_every == 0) || s == o_.steps) && !survive([&] { evaluate(); })) return false;
  if (!o_.save.empty() && ((o_.save_every > 0 && s % o_.save_every == 0) || s == stop_)) {
    if (!survive([&] { s_.diloco ? s_.diloco->save(o_.save, *s_.trainer) : s_.trainer->save(o_.save); })) return false;
    if (s_.root) std::printf("saved %s at step %d\n", (s_.diloco ? o_.save : st::checkpoint_path(o_.save)).c_str(), s);
  }
  return true;
}

bool Loop::take_back_replacements() {
  const int s = s_.door_checked = s_.trainer->step();
  int waiting = 0;
  if (!survive([&] { waiting = s_.diloco->newcomers(); })) return false;
  const int island = s_.groups->world().size();
  if (waiting >= island) {
    st::Diloco::Healing h;
    if (!survive([&] { h = s_.diloco->take_back(o_, *s_.trainer, *s_.groups, waiting - waiting % island); }))
      return false;
    s_.root = s_.diloco->job_rank() == 0;
    std::string back;
    for (int k : h.islands) back += (back.empty() ? "" : ", ") + std::to_string(k);
    if (s_.root && h.healed)
      std::printf("step %5d: island%s %s came back and took island %d's state (%s in %.2f s); %d islands go on "
                  "with the global batch of %d\n",
                  s, h.islands.size() > 1 ? "s" : "", back.c_str(), h.donor,
                  st::mb(static_cast<double>(h.bytes)).c_str(), h.seconds, o_.outer.islands, o_.batch);
    if (s_.root && !h.healed)
      std::printf("step %5d: %d replacement ranks wait, but taking them in failed: %s\n", s, waiting, h.why.c_str());
  }
  return true;
}

bool Loop::step() {
  double t0 = now_s();
  st::StepResult r;
  if (!survive([&] {
        r = s_.trainer->train_step();
        if (s_.diloco) s_.diloco->after_step(*s_.trainer);
      }))
    return false;
  double dt = now_s() - t0;
  last_loss_ = r.loss;
  if (s_.trainer->step() > first_ || stop_ == first_) {
    if (timed_++ == 0) timed_from_ = s_.trainer->step();
    comm_wait_ += r.comm_wait_s;
    idle_ += r.idle_s;
    gather_ += r.gather_s;
    busy_ += r.time_s;
  }
  for (size_t i = 0; i < traffic_.size(); ++i) traffic_[i] += static_cast<double>(r.bytes[i]);
  if (!std::isfinite(r.loss))
    throw st::TrainError("loss is " + std::to_string(r.loss) + " at step " + std::to_string(s_.trainer->step()) +
                         "; try a smaller --lr");
  const int s = s_.trainer->step();
  if (s_.root && (s % o_.log_every == 0 || s == stop_)) {
    double avg = (now_s() - t_start_) / std::max(1, s - first_ + 1);  // s < first after going back to a checkpoint
    std::printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %8.0f tok/s | %7.1f ms", s, o_.steps, r.loss, r.lr,
                r.grad_norm, tokens_ / dt, dt * 1e3);
    if (r_.world > 1)
      std::printf(" (compute %.1f, comm %.1f, idle %.1f%s)", (r.time_s - r.comm_wait_s - r.idle_s - r.gather_s) * 1e3,
                  r.comm_wait_s * 1e3, r.idle_s * 1e3,
                  o_.zero == 3 ? (", gather " + fixed1(r.gather_s * 1e3)).c_str() : "");
    if (s_.diloco) std::printf(" | %s", s_.diloco->progress().c_str());
    std::printf("%s | ETA %s\n", r_.device.step(tokens_ / dt).c_str(), duration_text(avg * (stop_ - s)).c_str());
  }
  return true;
}

void Loop::run() {
  for (;;) {
    if (s_.leaves) return;
    // After a shrink every survivor comes back here, at one step and one `settled`: the
    // evaluation and saving of a step whose training some rank completed are done (again)
    // by all, before the next step.
    if (s_.settled < s_.trainer->step()) {
      if (!end_of_step(s_.trainer->step())) continue;
      s_.settled = s_.trainer->step();
    }
    // A replacement starts at the step it was taken back at.
    if (s_.diloco && o_.on_failure == "continue" && s_.trainer->step() % o_.diloco_h == 0 &&
        s_.trainer->step() < stop_ && s_.trainer->step() != s_.door_checked && !take_back_replacements())
      continue;
    if (s_.trainer->step() >= stop_) break;
    if (!step()) continue;
  }
}

void Loop::print_summary(double elapsed, int ran, const std::string& outer_summary) {
  st::Trainer& trainer = *s_.trainer;
  std::printf("done: steps %d..%d in %.1f s (%.1f ms/step, %.0f tok/s) | last loss %.6f", first_, trainer.step(),
              elapsed, ran > 0 ? elapsed / ran * 1e3 : 0.0, ran > 0 ? tokens_ * ran / elapsed : 0.0, last_loss_);
  if (!std::isnan(last_val_)) std::printf(" | val loss %.6f", last_val_);
  if (r_.world > 1 && timed_ > 0)
    std::printf(" | per step from step %d: compute %.1f, comm %.1f, idle %.1f%s ms", timed_from_,
                (busy_ - comm_wait_ - idle_ - gather_) / timed_ * 1e3, comm_wait_ / timed_ * 1e3, idle_ / timed_ * 1e3,
                o_.zero == 3 ? (", gather " + fixed1(gather_ / timed_ * 1e3)).c_str() : "");
  std::printf("\n");
  if (s_.diloco) {
    std::fputs(outer_summary.c_str(), stdout);
  } else if (r_.world > 1 && ran > 0 && !s_.shrunk) {  // the formula is for one shape of the job
    for (double& t : traffic_) t /= ran;
    std::fputs(
        st::traffic_report(o_, trainer.layout(), s_.groups->coord(st::kPp), s_.groups->dp_is_world(), traffic_).c_str(),
        stdout);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS rank 0: %.1f MB", ru.ru_maxrss / 1024.0);
  if (o_.zero >= 2) std::printf(" | gradient staging peak: %d buckets", trainer.staging_peak());
  if (o_.zero == 3 && ran > 0)
    std::printf(" | zero 3: %llu layer-group gathers (evaluation included), %d gathered at most at once",
                static_cast<unsigned long long>(trainer.gathers()), trainer.gathered_buffers());
  std::printf("\n");
  if (trainer.step() < o_.steps)
    std::printf("stopped at step %d of %d%s\n", trainer.step(), o_.steps,
                o_.save.empty() ? "" : ("; continue with --resume " + o_.save).c_str());
}

void Loop::finish() {
  // No failure is survived from here on: the trainer and the groups stay.
  st::Trainer& trainer = *s_.trainer;
  st::ParallelGroups& groups = *s_.groups;
  if (s_.diloco && trainer.step() == o_.steps) s_.diloco->finish(trainer);  // the replicas adopt the global model
  double elapsed = now_s() - t_start_;
  int ran = trainer.step() - first_ + 1;
  const std::string outer_summary = s_.diloco ? s_.diloco->summary() : "";  // collective
  if (s_.root) print_summary(elapsed, ran, outer_summary);
  if (o_.sample_len > 0 && trainer.step() == o_.steps) {
    const std::string text = trainer.sample(o_.sample_len, o_.seed + trainer.step());  // collective
    if (s_.root)
      std::printf("sample (%d %s):\n%s\n", o_.sample_len, o_.model.vocab == 256 ? "bytes" : "token ids",
                  printable(text).c_str());
  }
  std::printf("rank %d parameter checksum %016llx", r_.rank, static_cast<unsigned long long>(trainer.param_checksum()));
  if (groups.model_parallel())
    std::printf(" | tp %d pp %d dp %d | replicated %016llx | peak activations %.2f MB (%d microbatches)"
                " | idle %.1f%% of the step",
                groups.coord(st::kTp), groups.coord(st::kPp), groups.coord(st::kDp),
                static_cast<unsigned long long>(trainer.replicated_checksum()), trainer.activation_bytes() / 1e6,
                trainer.microbatches_in_flight(), busy_ > 0 ? 100 * idle_ / busy_ : 0.0);
  if (groups.model_parallel() && trainer.layout().holds(st::tensor_wte()))  // the two copies must agree
    std::printf(" | tied embedding %016llx", static_cast<unsigned long long>(trainer.embedding_checksum()));
  std::printf("\n");
  std::fflush(stdout);
  groups.destroy();
  if (s_.diloco) s_.diloco->close();
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
  // Everything the user can get wrong is checked before joining the job and before any
  // file is written.
  st::validate_options(o, launch.size, !launch.launcher.empty(), st::default_device);
  Run r(o, launch);
  if (r.state.root) print_banner(r);
  Loop loop(r);
  loop.run();
  if (r.state.leaves) return 0;
  loop.finish();
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
