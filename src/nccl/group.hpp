// ncclGroupStart/ncclGroupEnd, per thread as in NCCL. Inside a group, communicator
// creations (init, split, shrink) and operations are recorded; the outermost ncclGroupEnd
// starts every creation at once (one thread may make several ranks of one communicator),
// then runs every communicator's operations concurrently (call.hpp's post: collectives in
// order, then all transfers as one group) and waits for all of them.
#pragma once

#include <memory>

#include "call.hpp"
#include "comm.hpp"

namespace strata_nccl {

bool in_group();
void group_start();
// ncclInProgress when a non-blocking creation goes on after it; throws the first failure.
ncclResult_t group_end();

void defer_creation(std::shared_ptr<CommState> state, CommState::Maker make, std::shared_ptr<CommState> parent);
void defer_call(std::shared_ptr<CommState> state, const NcclCall& call);

// One call outside a group: run now, on the caller's thread.
void run_now(CommState& state, const NcclCall& call);

}  // namespace strata_nccl
