#include "group.hpp"

#include <exception>
#include <utility>
#include <vector>

#include "strata/error.hpp"

namespace strata_nccl {

namespace {

struct Creation {
  std::shared_ptr<CommState> state;
  CommState::Maker make;
  std::shared_ptr<CommState> parent;  // a split's or shrink's
};

struct Deferred {
  std::shared_ptr<CommState> state;
  NcclCall call;
};

struct Group {
  int depth = 0;
  std::vector<Creation> creations;
  std::vector<Deferred> calls;
};

thread_local Group group;

// Runs `body`; a Strata failure is first noted on the communicator (its async error).
template <typename F>
auto noting(CommState& state, F&& body) {
  try {
    return body();
  } catch (const strata::Error& e) {
    state.note_failure(e);
    throw;
  }
}

// Every communicator's calls, started concurrently (each communicator's run in order on
// its own worker), then waited for; the first failure is rethrown once all have ended.
void run_calls(std::vector<Deferred> calls) {
  struct PerComm {
    std::shared_ptr<CommState> state;
    std::vector<NcclCall> calls;
  };
  std::vector<PerComm> comms;  // in order of first appearance
  for (Deferred& d : calls) {
    auto it = comms.begin();
    while (it != comms.end() && it->state != d.state) ++it;
    if (it == comms.end()) it = comms.insert(comms.end(), PerComm{d.state, {}});
    it->calls.push_back(d.call);
  }
  const bool one = comms.size() == 1;  // then on this thread, blocking: no worker needed
  std::vector<std::vector<Work>> work(comms.size());
  std::vector<std::vector<strata::Request>> pending(comms.size());
  std::exception_ptr first;
  for (size_t i = 0; i < comms.size(); ++i) {
    CommState& s = *comms[i].state;
    try {
      noting(s, [&] {
        strata::Comm c = s.use();
        for (const NcclCall& call : comms[i].calls) work[i].push_back(translate(call, s, c));
        pending[i] = post(c, work[i], one);
      });
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  for (size_t i = 0; i < comms.size(); ++i)
    for (strata::Request& r : pending[i]) {
      try {
        noting(*comms[i].state, [&] { r.wait(); });
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
  if (first) std::rethrow_exception(first);
}

}  // namespace

bool in_group() { return group.depth > 0; }

void group_start() { ++group.depth; }

ncclResult_t group_end() {
  if (group.depth == 0) throw strata::InvalidUsage("ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<Creation> creations = std::exchange(group.creations, {});
  std::vector<Deferred> calls = std::exchange(group.calls, {});
  bool in_progress = false;
  for (Creation& c : creations) c.state->create_in_background(std::move(c.make), c.parent);
  std::exception_ptr first;
  for (Creation& c : creations) {
    if (!c.state->blocking) {
      in_progress = true;
      continue;
    }
    try {
      c.state->made();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) {
    // The calls are not run: a communicator they need may be one that failed.
    std::rethrow_exception(first);
  }
  run_calls(std::move(calls));
  return in_progress ? ncclInProgress : ncclSuccess;
}

void defer_creation(std::shared_ptr<CommState> state, CommState::Maker make, std::shared_ptr<CommState> parent) {
  state->expect_creation();
  group.creations.push_back({std::move(state), std::move(make), std::move(parent)});
}

void defer_call(std::shared_ptr<CommState> state, const NcclCall& call) { group.calls.push_back({std::move(state), call}); }

void run_now(CommState& state, const NcclCall& call) {
  noting(state, [&] {
    strata::Comm c = state.use();
    const Work work = translate(call, state, c);
    post(c, std::span(&work, 1), true);
  });
}

}  // namespace strata_nccl
