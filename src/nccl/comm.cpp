#include "comm.hpp"

#include <dlfcn.h>

#include <thread>
#include <unordered_map>
#include <utility>

#include "errors.hpp"
#include "strata/device.hpp"

namespace strata_nccl {

void CommState::create_now(const Maker& make) {
  strata::Comm made = make();
  std::lock_guard lk(m_);
  comm_ = std::move(made);
}

void CommState::create_in_background(Maker make, std::shared_ptr<CommState> parent) {
  {
    std::lock_guard lk(m_);
    creating_ = true;
  }
  if (parent) {
    // Counted before this call returns, so the parent's next call waits for the split.
    std::lock_guard lk(parent->m_);
    ++parent->splitting_;
  }
  // Detached: ncclCommAbort must not wait for a creation whose peers never come (it ends
  // within STRATA_TIMEOUT and is then aborted by finish_creation).
  std::thread([self = shared_from_this(), make = std::move(make), parent] {
    strata::Comm made;
    std::exception_ptr failure;
    try {
      made = make();
    } catch (...) {
      failure = std::current_exception();
    }
    if (parent) {
      std::lock_guard lk(parent->m_);
      --parent->splitting_;
      parent->settled_.notify_all();
    }
    self->finish_creation(std::move(made), failure);
  }).detach();
}

void CommState::finish_creation(strata::Comm made, std::exception_ptr failure) {
  std::unique_lock lk(m_);
  creating_ = false;
  if (failure) {
    creation_failure_ = failure;
    try {
      std::rethrow_exception(failure);
    } catch (const strata::Error& e) {
      error_ = code_of(e.kind());
      error_text_ = std::string("creating the communicator failed: ") + e.what();
    } catch (const std::exception& e) {
      error_ = ncclInternalError;
      error_text_ = std::string("creating the communicator failed: ") + e.what();
    }
  } else if (aborted_) {
    lk.unlock();
    if (made.valid()) made.abort();
    lk.lock();
  } else {
    comm_ = std::move(made);
  }
  settled_.notify_all();
}

void CommState::settle() {
  std::unique_lock lk(m_);
  settled_.wait(lk, [&] { return !creating_ && splitting_ == 0; });
}

void CommState::expect_creation() {
  std::lock_guard lk(m_);
  creating_ = true;
}

strata::Comm CommState::use() {
  std::unique_lock lk(m_);
  settled_.wait(lk, [&] { return !creating_ && splitting_ == 0; });
  return comm_locked();
}

strata::Comm CommState::made() {
  std::unique_lock lk(m_);
  settled_.wait(lk, [&] { return !creating_; });
  return comm_locked();
}

strata::Comm CommState::comm_locked() const {
  if (aborted_) throw strata::InvalidUsage("the communicator was aborted (ncclCommAbort)");
  if (finalized_) throw strata::InvalidUsage("the communicator was finalized (ncclCommFinalize)");
  if (creation_failure_) std::rethrow_exception(creation_failure_);
  return comm_;
}

ncclResult_t CommState::async_error(std::string* what) {
  std::lock_guard lk(m_);
  if (creating_ || splitting_ > 0) return ncclInProgress;
  if (error_ == ncclSuccess && comm_.valid()) {
    // A device operation that failed after its call returned (stream-ordered).
    if (std::exception_ptr failed = comm_.async_error()) {
      try {
        std::rethrow_exception(failed);
      } catch (const strata::Error& e) {
        error_ = code_of(e.kind());
        error_text_ = e.what();
      } catch (const std::exception& e) {
        error_ = ncclInternalError;
        error_text_ = e.what();
      }
    }
  }
  if (what) *what = error_text_;
  return error_;
}

void CommState::note_failure(const strata::Error& e) {
  // This rank's own mistakes leave the communicator usable; a peer's failure or refusal, a
  // timeout or the OS's refusal do not.
  const bool broken = dynamic_cast<const strata::PeerError*>(&e) || e.kind() == strata::ErrorKind::system ||
                      e.kind() == strata::ErrorKind::internal;
  if (!broken) return;
  std::lock_guard lk(m_);
  if (error_ != ncclSuccess) return;  // the first failure is the cause
  error_ = code_of(e.kind());
  error_text_ = e.what();
}

ncclRedOp_t CommState::add_op(PreMulSum op) {
  std::lock_guard lk(m_);
  if (next_op_ == ncclMaxRedOp) throw strata::InvalidUsage("every ncclRedOp_t value has been handed out");
  const int id = next_op_++;
  ops_.emplace(id, std::move(op));
  return static_cast<ncclRedOp_t>(id);
}

void CommState::remove_op(ncclRedOp_t op) {
  std::lock_guard lk(m_);
  if (!ops_.erase(static_cast<int>(op)))
    throw strata::InvalidArgument("op " + std::to_string(static_cast<int>(op)) +
                                  " is not a reduction operator made by ncclRedOpCreatePreMulSum on this "
                                  "communicator (or it was destroyed already)");
}

PreMulSum CommState::op(ncclRedOp_t op) const {
  std::lock_guard lk(m_);
  auto it = ops_.find(static_cast<int>(op));
  if (it == ops_.end())
    throw strata::InvalidArgument("op " + std::to_string(static_cast<int>(op)) +
                                  " is neither a built-in ncclRedOp_t nor one ncclRedOpCreatePreMulSum made on "
                                  "this communicator");
  return it->second;
}

void* CommState::add_registration(void* buff, size_t size) {
  strata::Comm c = use();
  void* registered = nullptr;
  if (buff && size > 0 && strata::device::kind_of(buff) == strata::MemoryKind::host) {
    try {
      registered = c.register_buffer(buff, size);
    } catch (const strata::InvalidArgument&) {
      // Private memory (malloc's, the stack): no other process can map it; used as it is.
    }
  }
  auto handle = std::make_unique<char>();  // a unique address for the caller to hand back
  std::lock_guard lk(m_);
  void* h = handle.release();
  registrations_.emplace(h, registered);
  return h;
}

void CommState::remove_registration(void* handle) {
  void* registered = nullptr;
  bool live = false;
  {
    std::lock_guard lk(m_);
    auto it = registrations_.find(handle);
    if (it == registrations_.end())
      throw strata::InvalidArgument("handle is not a registration of this communicator (ncclCommRegister)");
    registered = it->second;
    registrations_.erase(it);
    delete static_cast<char*>(handle);
    live = comm_.valid() && !finalized_ && !aborted_;
  }
  // A communicator finalized or aborted since released its registrations with it.
  if (registered && live) use().deregister_buffer(registered);
}

void CommState::finalize() {
  settle();
  strata::Comm c;
  {
    std::lock_guard lk(m_);
    if (aborted_) throw strata::InvalidUsage("the communicator was aborted (ncclCommAbort)");
    if (finalized_) throw strata::InvalidUsage("the communicator was finalized already");
    finalized_ = true;
    c = std::exchange(comm_, {});
  }
  if (c.valid()) c.destroy();
}

void CommState::destroy() {
  settle();
  strata::Comm c;
  {
    std::lock_guard lk(m_);
    if (!finalized_ && !aborted_) c = std::exchange(comm_, {});
    finalized_ = true;
  }
  if (c.valid()) c.destroy();
}

CommState::~CommState() {
  for (auto& r : registrations_) delete static_cast<char*>(r.first);
}

void CommState::abort() {
  strata::Comm c;
  {
    std::lock_guard lk(m_);
    if (aborted_) return;
    aborted_ = true;
    c = std::exchange(comm_, {});
  }
  if (c.valid()) c.abort();
}

// ---- handles ----

}  // namespace strata_nccl

struct ncclComm {};  // a unique address; the registry holds the state

namespace strata_nccl {

namespace {
std::mutex registry_m;
std::unordered_map<ncclComm_t, std::shared_ptr<CommState>>& registry() {
  static auto* r = new std::unordered_map<ncclComm_t, std::shared_ptr<CommState>>;  // outlives exit-time calls
  return *r;
}
}  // namespace

ncclComm_t adopt(std::shared_ptr<CommState> state) {
  auto* h = new ncclComm;
  std::lock_guard lk(registry_m);
  registry().emplace(h, std::move(state));
  return h;
}

std::shared_ptr<CommState> lookup(ncclComm_t comm) {
  if (!comm) throw strata::InvalidArgument("comm is NULL");
  std::lock_guard lk(registry_m);
  auto it = registry().find(comm);
  if (it == registry().end())
    throw strata::InvalidArgument("comm is not a live communicator (destroyed, aborted, or never created)");
  return it->second;
}

void forget(ncclComm_t comm) {
  {
    std::lock_guard lk(registry_m);
    registry().erase(comm);
  }
  delete comm;
}

int current_cuda_device() {
  // RTLD_NOLOAD: only a runtime the program already loaded (PyTorch, nccl-tests); none is
  // loaded for it.
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    auto get_device = reinterpret_cast<int (*)(int*)>(dlsym(h, "cudaGetDevice"));
    int device = 0;
    const bool ok = get_device && get_device(&device) == 0;
    dlclose(h);
    if (ok) return device;
  }
  return 0;
}

}  // namespace strata_nccl
