// Each step of the replay has a deadline: a step that has not ended by then is a hang, and
// the process says which variant, rank and step hung, and the steps before it, then exits
// with status 124 (what a GPU would do for ever, CI reports in seconds).
#pragma once

#include <string>

namespace replay {

// Starts the watcher thread. `variant` names this run in every message.
void start_deadlines(const std::string& variant, int rank, double step_deadline_s);
// This thread's next step begins (the previous one ended); printed as it goes.
void step(const std::string& what);
// The run ended: the watcher stops.
void stop_deadlines();

}  // namespace replay
