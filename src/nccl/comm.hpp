// What an ncclComm_t stands for. A handle is looked up in a registry on every call, so a
// destroyed one is refused rather than followed, and calls hold the state by shared_ptr,
// so ncclCommAbort on another thread never frees what a waiting call still uses.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl/nccl.h"
#include "strata/strata.hpp"

namespace strata_nccl {

// A pre-multiplied sum (ncclRedOpCreatePreMulSum): the type it was made for and its
// scalar, copied (host immediate) or read through `where` at each call (device residence).
struct PreMulSum {
  ncclDataType_t type;
  std::vector<std::byte> value;
  const void* where = nullptr;
  const void* scalar() const { return where ? where : value.data(); }
};

class CommState : public std::enable_shared_from_this<CommState> {
 public:
  // What makes the Strata communicator (init_rank, split, shrink): run now, on a thread
  // of its own, or at the enclosing group's end.
  using Maker = std::function<strata::Comm()>;

  CommState(bool blocking, int cuda_device) : blocking(blocking), cuda_device(cuda_device) {}
  ~CommState();  // releases registrations never deregistered
  const bool blocking;  // ncclConfig_t::blocking: false makes creation and split return ncclInProgress
  const int cuda_device;

  // Runs `make` here; throws its failure.
  void create_now(const Maker& make);
  // Creation will start later (at the group's end): until then it is in progress.
  void expect_creation();
  // Runs `make` on a thread; ncclCommGetAsyncError says ncclInProgress meanwhile.
  // `parent` (a split's) says so too, and its calls wait until the split is done.
  void create_in_background(Maker make, std::shared_ptr<CommState> parent = nullptr);
  // Blocks until no creation or split of this one is in progress.
  void settle();

  // The Strata communicator, for one call: waits for a creation or split in progress;
  // throws the creation's failure, or InvalidUsage after ncclCommFinalize or ncclCommAbort.
  strata::Comm use();
  // The same without waiting for splits of this one: for the split itself to use.
  strata::Comm made();

  // ncclCommGetAsyncError: ncclInProgress while being made or split; otherwise the failure
  // that broke the communicator (its message in `what`): a failed call's, or a device
  // operation's that failed after its call returned (strata::Comm::async_error); or ncclSuccess.
  ncclResult_t async_error(std::string* what);
  // A call on it failed: a failure that leaves it broken (a peer's, a timeout, the OS's)
  // becomes its asynchronous error.
  void note_failure(const strata::Error& e);

  // Pre-multiplied sums made on this communicator.
  ncclRedOp_t add_op(PreMulSum op);
  void remove_op(ncclRedOp_t op);  // InvalidArgument when it is not one
  PreMulSum op(ncclRedOp_t op) const;  // InvalidArgument when it is not one

  // ncclCommRegister: host memory that other processes can map (strata::alloc's, a memfd
  // mapped MAP_SHARED) is registered with the communicator (Comm::register_buffer: peers on
  // the node read it in place); other memory is used as it is, unregistered, as NCCL does
  // with buffers it cannot register (device memory needs no registration: the ipc link
  // maps Strata's allocations, and stages a program's own). The handle is ours either way,
  // so a wrong or repeated deregistration is InvalidArgument.
  void* add_registration(void* buff, size_t size);
  void remove_registration(void* handle);

  // ncclCommFinalize (finishes and leaves: Strata's destroy), ncclCommDestroy (Finalize
  // unless done, then releases), ncclCommAbort (local: fails waiting calls at once).
  void finalize();
  void destroy();
  void abort();

 private:
  void finish_creation(strata::Comm made, std::exception_ptr failure);
  strata::Comm comm_locked() const;  // m_ held, nothing in progress

  mutable std::mutex m_;
  std::condition_variable settled_;
  bool creating_ = false;
  int splitting_ = 0;  // splits of this communicator running in the background
  strata::Comm comm_;  // valid once made, until finalized or aborted
  bool finalized_ = false, aborted_ = false;
  std::exception_ptr creation_failure_;
  ncclResult_t error_ = ncclSuccess;  // what broke it (its creation, or a failed call)
  std::string error_text_;
  std::map<int, PreMulSum> ops_;
  int next_op_ = ncclNumOps;
  std::map<void*, void*> registrations_;  // our handle -> Comm::register_buffer's (nullptr: unregistered)
};

// The handle the caller holds for a state.
ncclComm_t adopt(std::shared_ptr<CommState> state);
// The state behind a handle: InvalidArgument for NULL or a handle not (or no longer) live.
std::shared_ptr<CommState> lookup(ncclComm_t comm);
// Ends a handle (ncclCommDestroy, ncclCommAbort): later lookups refuse it.
void forget(ncclComm_t comm);

// The CUDA device current on this thread when the CUDA runtime is loaded in the process
// (as NCCL records it at creation); 0 otherwise.
int current_cuda_device();

}  // namespace strata_nccl
