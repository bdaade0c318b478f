// Where one rank's time in a training step goes: waiting on communication that
// computation did not hide (tensor-parallel collectives, which block the layer that
// needs them; the data-parallel reductions backward did not cover; loss, norm and tied
// embedding reductions), waiting for a pipeline neighbour's activation or gradient
// (pipeline idle: the bubble, and any imbalance between stages), waiting for ZeRO-3's
// parameter gathers that prefetching did not hide, and the rest (compute).
#pragma once

#include <chrono>

namespace strata::train {

class StepClock {
 public:
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void reset() { comm_s_ = idle_s_ = gather_s_ = 0; }
  double comm_s() const { return comm_s_; }
  double idle_s() const { return idle_s_; }
  double gather_s() const { return gather_s_; }

  // Runs f, counting its time as exposed communication / as pipeline idle.
  template <class F>
  void comm(F&& f) { time(comm_s_, f); }
  template <class F>
  void idle(F&& f) { time(idle_s_, f); }
  template <class F>
  void gather(F&& f) { time(gather_s_, f); }

 private:
  template <class F>
  static void time(double& into, F& f) {
    const double t0 = now();
    f();
    into += now() - t0;
  }
  double comm_s_ = 0, idle_s_ = 0, gather_s_ = 0;
};

}  // namespace strata::train
