#include "recovery.hpp"

#include <cstdarg>
#include <cstdio>
#include <strata/strata.hpp>

#include "checkpoint.hpp"
#include "errors.hpp"
#include "relayout.hpp"
#include "step_clock.hpp"

namespace strata::train {
namespace {

// printf into a string.
__attribute__((format(printf, 1, 2))) std::string formatted(const char* fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(static_cast<size_t>(n > 0 ? n : 0), '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, again);
  va_end(again);
  return s;
}

}  // namespace

std::optional<RecoveryReport> RecoveryPolicy::run(const std::function<void()>& work, RunState& state) const {
  try {
    work();
    return std::nullopt;
  } catch (const OuterFailure& failure) {  // between islands: DiLoCo, --on-failure continue
    if (o_.on_failure != "continue") throw;
    return without_lost_islands(failure, state);
  } catch (const strata::PeerError& peer) {  // a rank died or stopped (TimeoutError too)
    if (o_.on_failure == "continue")         // inside this rank's island
      throw TrainError("island " + std::to_string(island_of(o_, rank_, world_)) + " lost a rank (" + peer.what() +
                       "): it stops, and the other islands go on without it");
    if (o_.on_failure != "shrink") throw;
    const double t0 = StepClock::now();
    const int at = state.trainer->step() + 1;
    state.shrunk = true;
    if (state_dies_with_a_rank(o_)) return from_checkpoint(at, t0, state);  // on fewer ranks
    return from_own_state(peer, at, t0, state);
  }
}

RecoveryReport RecoveryPolicy::without_lost_islands(const OuterFailure& failure, RunState& s) const {
  const double t0 = StepClock::now();
  const int at = s.trainer->step();
  const int islands = o_.outer.islands;
  Diloco::IslandLoss loss;
  try {
    loss = s.diloco->go_on_without_lost_islands(o_, *s.trainer, *s.groups);
  } catch (const strata::PeerError& e) {
    throw TrainError(std::string("the other islands went on without this one: it stops (") + e.what() + ")");
  }
  if (!loss.stays) throw TrainError(loss.why + ": it stops, and the whole islands go on without it");
  s.shrunk = true;
  s.root = s.diloco->job_rank() == 0;
  // Every island left is at the outer step it went back to, whether or not it had passed
  // it before: the step is settled, and the door (just opened) is looked at from the next.
  s.settled = s.door_checked = s.trainer->step();
  std::string lost, dead, caught_up;
  for (int k : loss.lost) lost += (lost.empty() ? "" : ", ") + std::to_string(k);
  for (int x : loss.dead) dead += (dead.empty() ? "" : ", ") + std::to_string(x);
  for (int k : loss.caught_up) caught_up += " " + std::to_string(k);
  if (!caught_up.empty())
    caught_up = "; island" + caught_up + " (as numbered now) missed the end of that exchange and took its result";
  RecoveryReport report;
  if (s.root)
    report.line = formatted(
        "step %5d: island%s %s of %d stopped (rank%s %s gone); %d islands go on from the outer step "
        "of step %d (steps %d-%d lost)%s with the global batch of %d | %.2f s | the failure: %s\n",
        at, loss.lost.size() > 1 ? "s" : "", lost.c_str(), islands, loss.dead.size() > 1 ? "s" : "", dead.c_str(),
        loss.islands, loss.step, loss.step + 1, at, caught_up.c_str(), o_.batch, StepClock::now() - t0, failure.what());
  return report;
}

RecoveryReport RecoveryPolicy::from_checkpoint(int at, double t0, RunState& s) const {
  Relayout r = relayout_after_failure(o_, *s.groups);
  s.trainer.reset();
  s.groups->destroy();
  s.groups.reset();
  RecoveryReport report;
  if (!r.stays) {
    report.line =
        formatted("rank %d: not needed by the layout the %d survivors go on with; it leaves\n", rank_, r.survivors);
    s.leaves = true;
    return report;
  }
  s.groups = make_groups(o_, r.world, 0);
  s.trainer = std::make_unique<Trainer>(o_, *s.groups, data_, kernels_);
  if (r.checkpoint_step > 0) s.trainer->load(CheckpointReader(r.checkpoint_dir));
  s.settled = s.trainer->step();
  s.root = s.groups->world().rank() == 0;
  if (s.root)
    report.line = formatted(
        "step %5d: %s failed; %d ranks left, %d go on as tp %d x pp %d x dp %d from %s, losing %s | %.2f s\n", at,
        r.lost_text().c_str(), r.survivors, s.groups->world().size(), o_.tp, o_.pp, o_.dp,
        r.checkpoint_step > 0
            ? ("the checkpoint of step " + std::to_string(r.checkpoint_step) + " in " + r.checkpoint_dir).c_str()
            : "the initial model (no checkpoint yet)",
        at - 1 > r.checkpoint_step ? ("steps " + std::to_string(r.checkpoint_step + 1) + "-" + std::to_string(at - 1) +
                                      " (" + std::to_string(at - 1 - r.checkpoint_step) + ")")
                                         .c_str()
                                   : "no step",
        StepClock::now() - t0);
  return report;
}

RecoveryReport RecoveryPolicy::from_own_state(const strata::PeerError& peer, int at, double t0, RunState& s) const {
  const Trainer::Recovery rec = s.trainer->go_on_after_failure();
  s.root = s.groups->world().rank() == 0;
  // A rank may have settled a step the others did not reach: all settle from the least.
  float mine = static_cast<float>(s.settled), least = 0;
  s.groups->world().all_reduce(&mine, &least, 1, strata::ReduceOp::min).wait();
  s.settled = static_cast<int>(least);
  RecoveryReport report;
  if (s.root)
    report.line = formatted(
        "step %5d: rank %d failed; %d ranks go on from step %d after %.2f s with the global batch of %d: its %d "
        "slices of %d sequences dealt in turn, %zu on rank 0 (more accumulation microbatches)%s\n",
        at, peer.peer(), rec.ranks, rec.step + 1, StepClock::now() - t0, o_.batch, o_.dp, o_.batch / o_.dp,
        rec.slices.size(),
        rec.ahead < 0 ? ""
                      : ("; rank " + std::to_string(rec.ahead) + " of them had completed step " +
                         std::to_string(rec.step) + ", and the others took its state")
                            .c_str());
  return report;
}

}  // namespace strata::train
