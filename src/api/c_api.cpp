// The C API: a thin layer over the C++ one that turns exceptions into result codes and a
// thread-local last-error string, and refuses handles that were already destroyed.
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "strata.h"
#include "strata/device.hpp"
#include "strata/outer_sync.hpp"
#include "strata/strata.hpp"

struct strataComm {
  strata::Comm comm;
};
struct strataRequest {
  strata::Request req;
};
struct strataOuterSync {
  strata::OuterSync sync;
};

namespace {

thread_local std::string last_error;

// Live handles: using a destroyed one is an error, not a crash.
template <class Handle>
class Registry {
 public:
  void add(Handle* h) {
    std::lock_guard lk(m_);
    live_.insert(h);
  }
  bool has(Handle* h) {
    std::lock_guard lk(m_);
    return live_.count(h) != 0;
  }
  void remove(Handle* h) {
    std::lock_guard lk(m_);
    live_.erase(h);
  }

 private:
  std::mutex m_;
  std::unordered_set<Handle*> live_;
};
Registry<strataComm> registry;
Registry<strataOuterSync> outer_registry;

strataResult_t code_of(strata::ErrorKind k) {
  switch (k) {
    case strata::ErrorKind::invalid_argument: return strataInvalidArgument;
    case strata::ErrorKind::invalid_usage: return strataInvalidUsage;
    case strata::ErrorKind::remote: return strataRemoteError;
    case strata::ErrorKind::timeout: return strataTimeout;
    case strata::ErrorKind::system: return strataSystemError;
    case strata::ErrorKind::internal: return strataInternalError;
  }
  return strataInternalError;
}

strataResult_t fail(strataResult_t code, const std::string& msg) {
  last_error = msg;
  return code;
}

template <typename F>
strataResult_t guarded(F&& f) {
  try {
    return f();
  } catch (const strata::Error& e) {
    return fail(code_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(strataSystemError, "out of memory");
  } catch (const std::exception& e) {
    return fail(strataInternalError, e.what());
  }
}

strata::Comm& live(strataComm_t c) {
  if (!c) throw strata::InvalidUsage("comm is NULL (not created, or a split with STRATA_SPLIT_NOCOLOR)");
  if (!registry.has(c)) throw strata::InvalidUsage("comm is not a live communicator (destroyed or never created)");
  return c->comm;
}

strataResult_t adopt(strataComm_t* out, strata::Comm c) {
  if (!c.valid()) {
    *out = nullptr;
    return strataSuccess;
  }
  auto* h = new strataComm{std::move(c)};
  registry.add(h);
  *out = h;
  return strataSuccess;
}

void forget(strataComm_t c) { registry.remove(c); }

strata::OuterSync& live(strataOuterSync_t s) {
  if (!s) throw strata::InvalidUsage("outer sync is NULL");
  if (!outer_registry.has(s)) throw strata::InvalidUsage("outer sync is not a live handle (destroyed or never created)");
  return s->sync;
}

// Runs f on a live outer sync.
template <typename F>
strataResult_t on_outer(strataOuterSync_t s, F&& f) {
  return guarded([&] {
    f(live(s));
    return strataSuccess;
  });
}

strata::DataType dt(strataDataType_t t) { return static_cast<strata::DataType>(t); }
strata::ReduceOp rop(strataRedOp_t o) { return static_cast<strata::ReduceOp>(o); }

// Blocking when request is NULL; otherwise hands back a request to wait on.
template <typename Sync, typename Async>
strataResult_t issue(strataRequest_t* request, Sync&& sync, Async&& async) {
  return guarded([&] {
    if (!request) {
      sync();
    } else {
      *request = nullptr;
      *request = new strataRequest{async()};
    }
    return strataSuccess;
  });
}

// A call on a stream: returns once it is queued (its Request is not kept: the stream orders it).
template <typename F>
strataResult_t on_stream(F&& f) {
  return guarded([&] {
    f();
    return strataSuccess;
  });
}

}  // namespace

extern "C" {

const char* strataGetErrorString(strataResult_t r) {
  switch (r) {
    case strataSuccess: return "success";
    case strataInvalidArgument: return "invalid argument";
    case strataInvalidUsage: return "invalid usage";
    case strataRemoteError: return "remote error (a peer failed)";
    case strataTimeout: return "timeout (a peer made no progress)";
    case strataSystemError: return "system error";
    case strataInternalError: return "internal error";
    case strataInProgress: return "in progress";
  }
  return "unknown result code";
}

const char* strataGetLastError(void) { return last_error.c_str(); }

strataResult_t strataGetUniqueId(strataUniqueId* id) {
  return guarded([&] {
    if (!id) throw strata::InvalidArgument("strataGetUniqueId: id is NULL");
    strata::UniqueId u = strata::get_unique_id();
    std::memcpy(id->internal, u.bytes.data(), sizeof id->internal);
    return strataSuccess;
  });
}

strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId id, int rank) {
  return guarded([&] {
    if (!comm) throw strata::InvalidArgument("strataCommInitRank: comm is NULL");
    strata::UniqueId u;
    std::memcpy(u.bytes.data(), id.internal, sizeof id.internal);
    return adopt(comm, strata::Comm::init_rank(nranks, u, rank));
  });
}

strataResult_t strataCommInitFromEnv(strataComm_t* comm) {
  return guarded([&] {
    if (!comm) throw strata::InvalidArgument("strataCommInitFromEnv: comm is NULL");
    return adopt(comm, strata::Comm::init_from_env());
  });
}

strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm) {
  return guarded([&] {
    strata::Comm child = live(comm).split(color, key);
    if (!newcomm) {
      // The split is collective: it was done, so the other ranks are not left waiting in it;
      // the new communicator is destroyed, and its other ranks see this one leave.
      if (child.valid()) child.destroy();
      throw strata::InvalidArgument("strataCommSplit: newcomm is NULL (the split was done and its communicator "
                                    "destroyed on this rank)");
    }
    return adopt(newcomm, std::move(child));
  });
}

strataResult_t strataCommShrink(strataComm_t comm, strataComm_t* newcomm) {
  return guarded([&] {
    strata::Comm child = live(comm).shrink();
    if (!newcomm) {
      // As for a split: the shrink was done, so no survivor is left waiting in it.
      child.destroy();
      throw strata::InvalidArgument("strataCommShrink: newcomm is NULL (the shrink was done and its communicator "
                                    "destroyed on this rank)");
    }
    return adopt(newcomm, std::move(child));
  });
}

strataResult_t strataCommOpenDoor(strataComm_t comm, const char* address, strataUniqueId* id) {
  return guarded([&] {
    strata::Comm& c = live(comm);
    if (!id) throw strata::InvalidArgument("strataCommOpenDoor: id is NULL");
    const strata::UniqueId u = c.open_door(address ? address : "");
    std::memcpy(id->internal, u.bytes.data(), sizeof id->internal);
    return strataSuccess;
  });
}

strataResult_t strataCommNewcomers(strataComm_t comm, int* count) {
  return guarded([&] {
    strata::Comm& c = live(comm);
    if (!count) throw strata::InvalidArgument("strataCommNewcomers: count is NULL");
    *count = c.newcomers();
    return strataSuccess;
  });
}

strataResult_t strataCommGrow(strataComm_t comm, int count, int key, strataComm_t* newcomm) {
  return guarded([&] {
    strata::Comm grown = live(comm).grow(count, key);
    if (!newcomm) {
      // As for a split: the grow was done, so no rank is left waiting in it.
      grown.destroy();
      throw strata::InvalidArgument("strataCommGrow: newcomm is NULL (the grow was done and its communicator "
                                    "destroyed on this rank)");
    }
    return adopt(newcomm, std::move(grown));
  });
}

strataResult_t strataCommJoin(strataUniqueId id, int key, strataComm_t* newcomm) {
  return guarded([&] {
    if (!newcomm) throw strata::InvalidArgument("strataCommJoin: newcomm is NULL");
    strata::UniqueId u;
    std::memcpy(u.bytes.data(), id.internal, sizeof id.internal);
    return adopt(newcomm, strata::Comm::join(u, key));
  });
}

strataResult_t strataCommDestroy(strataComm_t comm) {
  return guarded([&] {
    live(comm).destroy();
    forget(comm);
    delete comm;
    return strataSuccess;
  });
}

strataResult_t strataCommAbort(strataComm_t comm) {
  return guarded([&] {
    live(comm).abort();
    forget(comm);
    delete comm;
    return strataSuccess;
  });
}

strataResult_t strataCommRank(strataComm_t comm, int* rank) {
  return guarded([&] {
    if (!rank) throw strata::InvalidArgument("strataCommRank: rank is NULL");
    *rank = live(comm).rank();
    return strataSuccess;
  });
}

strataResult_t strataCommCount(strataComm_t comm, int* count) {
  return guarded([&] {
    if (!count) throw strata::InvalidArgument("strataCommCount: count is NULL");
    *count = live(comm).size();
    return strataSuccess;
  });
}

strataResult_t strataAllReduce(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o, strataComm_t comm,
                               strataRequest_t* req) {
  return issue(req, [&] { live(comm).all_reduce(s, r, n, dt(t), rop(o)); },
               [&] { return live(comm).all_reduce_async(s, r, n, dt(t), rop(o)); });
}

strataResult_t strataReduceScatter(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o,
                                   strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).reduce_scatter(s, r, n, dt(t), rop(o)); },
               [&] { return live(comm).reduce_scatter_async(s, r, n, dt(t), rop(o)); });
}

strataResult_t strataAllGather(const void* s, void* r, size_t n, strataDataType_t t, strataComm_t comm,
                               strataRequest_t* req) {
  return issue(req, [&] { live(comm).all_gather(s, r, n, dt(t)); },
               [&] { return live(comm).all_gather_async(s, r, n, dt(t)); });
}

strataResult_t strataBroadcast(const void* s, void* r, size_t n, strataDataType_t t, int root, strataComm_t comm,
                               strataRequest_t* req) {
  return issue(req, [&] { live(comm).broadcast(s, r, n, dt(t), root); },
               [&] { return live(comm).broadcast_async(s, r, n, dt(t), root); });
}

strataResult_t strataReduce(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o, int root,
                            strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).reduce(s, r, n, dt(t), rop(o), root); },
               [&] { return live(comm).reduce_async(s, r, n, dt(t), rop(o), root); });
}

strataResult_t strataAllToAll(const void* s, void* r, size_t n, strataDataType_t t, strataComm_t comm,
                              strataRequest_t* req) {
  return issue(req, [&] { live(comm).all_to_all(s, r, n, dt(t)); },
               [&] { return live(comm).all_to_all_async(s, r, n, dt(t)); });
}

strataResult_t strataBarrier(strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).barrier(); }, [&] { return live(comm).barrier_async(); });
}

strataResult_t strataSend(const void* b, size_t n, strataDataType_t t, int peer, strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).send(b, n, dt(t), peer); }, [&] { return live(comm).send_async(b, n, dt(t), peer); });
}

strataResult_t strataRecv(void* b, size_t n, strataDataType_t t, int peer, strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).recv(b, n, dt(t), peer); }, [&] { return live(comm).recv_async(b, n, dt(t), peer); });
}

strataResult_t strataGroupStart(strataComm_t comm) {
  return guarded([&] {
    live(comm).group_start();
    return strataSuccess;
  });
}

strataResult_t strataGroupEnd(strataComm_t comm, strataRequest_t* req) {
  return issue(req, [&] { live(comm).group_end(); }, [&] { return live(comm).group_end_async(); });
}

strataResult_t strataAllReduceOnStream(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o,
                                       strataComm_t comm, strataStream_t st) {
  return on_stream([&] { live(comm).all_reduce(s, r, n, dt(t), rop(o), st); });
}

strataResult_t strataReduceScatterOnStream(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o,
                                           strataComm_t comm, strataStream_t st) {
  return on_stream([&] { live(comm).reduce_scatter(s, r, n, dt(t), rop(o), st); });
}

strataResult_t strataAllGatherOnStream(const void* s, void* r, size_t n, strataDataType_t t, strataComm_t comm,
                                       strataStream_t st) {
  return on_stream([&] { live(comm).all_gather(s, r, n, dt(t), st); });
}

strataResult_t strataBroadcastOnStream(const void* s, void* r, size_t n, strataDataType_t t, int root,
                                       strataComm_t comm, strataStream_t st) {
  return on_stream([&] { live(comm).broadcast(s, r, n, dt(t), root, st); });
}

strataResult_t strataReduceOnStream(const void* s, void* r, size_t n, strataDataType_t t, strataRedOp_t o, int root,
                                    strataComm_t comm, strataStream_t st) {
  return on_stream([&] { live(comm).reduce(s, r, n, dt(t), rop(o), root, st); });
}

strataResult_t strataAllToAllOnStream(const void* s, void* r, size_t n, strataDataType_t t, strataComm_t comm,
                                      strataStream_t st) {
  return on_stream([&] { live(comm).all_to_all(s, r, n, dt(t), st); });
}

strataResult_t strataBarrierOnStream(strataComm_t comm, strataStream_t st) {
  return on_stream([&] { live(comm).barrier(st); });
}

strataResult_t strataSendOnStream(const void* b, size_t n, strataDataType_t t, int peer, strataComm_t comm,
                                  strataStream_t st) {
  return on_stream([&] { live(comm).send(b, n, dt(t), peer, st); });
}

strataResult_t strataRecvOnStream(void* b, size_t n, strataDataType_t t, int peer, strataComm_t comm,
                                  strataStream_t st) {
  return on_stream([&] { live(comm).recv(b, n, dt(t), peer, st); });
}

strataResult_t strataCommGetAsyncError(strataComm_t comm, strataResult_t* async_error) {
  return guarded([&] {
    if (!async_error) throw strata::InvalidArgument("strataCommGetAsyncError: asyncError is NULL");
    *async_error = strataSuccess;
    if (std::exception_ptr e = live(comm).async_error()) {
      try {
        std::rethrow_exception(e);
      } catch (const strata::Error& err) {
        *async_error = code_of(err.kind());
        last_error = err.what();
      } catch (const std::exception& err) {
        *async_error = strataInternalError;
        last_error = err.what();
      }
    }
    return strataSuccess;
  });
}

strataResult_t strataMemAlloc(void** ptr, size_t size) {
  return guarded([&] {
    if (!ptr) throw strata::InvalidArgument("strataMemAlloc: ptr is NULL");
    *ptr = nullptr;
    *ptr = strata::alloc(size, strata::MemoryKind::device);
    return strataSuccess;
  });
}

strataResult_t strataMemAllocHost(void** ptr, size_t size) {
  return guarded([&] {
    if (!ptr) throw strata::InvalidArgument("strataMemAllocHost: ptr is NULL");
    *ptr = nullptr;
    *ptr = strata::alloc(size, strata::MemoryKind::host);
    return strataSuccess;
  });
}

strataResult_t strataMemFree(void* ptr) {
  return guarded([&] {
    strata::free(ptr);
    return strataSuccess;
  });
}

strataResult_t strataCommRegister(strataComm_t comm, void* buff, size_t size, void** handle) {
  return guarded([&] {
    if (!handle) throw strata::InvalidArgument("strataCommRegister: handle is NULL");
    *handle = nullptr;
    *handle = live(comm).register_buffer(buff, size);
    return strataSuccess;
  });
}

strataResult_t strataCommDeregister(strataComm_t comm, void* handle) {
  return guarded([&] {
    live(comm).deregister_buffer(handle);
    return strataSuccess;
  });
}

strataResult_t strataWait(strataRequest_t request) {
  return guarded([&] {
    if (!request) throw strata::InvalidArgument("strataWait: request is NULL");
    try {
      request->req.wait();
    } catch (...) {
      delete request;
      throw;
    }
    delete request;
    return strataSuccess;
  });
}

strataResult_t strataTest(strataRequest_t request) {
  return guarded([&] {
    if (!request) throw strata::InvalidArgument("strataTest: request is NULL");
    bool done;
    try {
      done = request->req.test();
    } catch (...) {
      delete request;
      throw;
    }
    if (!done) return strataInProgress;
    delete request;
    return strataSuccess;
  });
}

strataResult_t strataOuterSyncConfigInit(strataOuterSyncConfig_t* c) {
  return guarded([&] {
    if (!c) throw strata::InvalidArgument("strataOuterSyncConfigInit: config is NULL");
    const strata::OuterSyncConfig d;  // the defaults are the C++ ones
    *c = {d.lr, d.momentum, d.nesterov, static_cast<strataWireFormat_t>(d.format), d.islands, d.every, d.fragments,
          d.overlap, d.mix};
    return strataSuccess;
  });
}

strataResult_t strataOuterSyncCreate(strataComm_t comm, float* params, size_t count, const strataOuterSyncConfig_t* c,
                                     const size_t* segments, size_t nsegments, strataOuterSync_t* out) {
  return guarded([&] {
    if (!out) throw strata::InvalidArgument("strataOuterSyncCreate: sync is NULL");
    if (!c) throw strata::InvalidArgument("strataOuterSyncCreate: config is NULL");
    if (!segments && nsegments) throw strata::InvalidArgument("strataOuterSyncCreate: segments is NULL");
    *out = nullptr;
    strata::OuterSyncConfig cfg;
    cfg.lr = c->lr;
    cfg.momentum = c->momentum;
    cfg.nesterov = c->nesterov != 0;
    cfg.format = static_cast<strata::WireFormat>(c->format);
    cfg.islands = c->islands;
    cfg.every = c->every;
    cfg.fragments = c->fragments;
    cfg.overlap = c->overlap;
    cfg.mix = c->mix;
    std::vector<size_t> segs(segments, segments + nsegments);
    auto* h = new strataOuterSync{strata::OuterSync(live(comm), params, count, cfg, std::move(segs))};
    outer_registry.add(h);
    *out = h;
    return strataSuccess;
  });
}

strataResult_t strataOuterSyncStep(strataOuterSync_t s) { return on_outer(s, [](strata::OuterSync& o) { o.step(); }); }
strataResult_t strataOuterSyncNow(strataOuterSync_t s) { return on_outer(s, [](strata::OuterSync& o) { o.sync(); }); }
strataResult_t strataOuterSyncFinish(strataOuterSync_t s) { return on_outer(s, [](strata::OuterSync& o) { o.finish(); }); }

strataResult_t strataOuterSyncGetStats(strataOuterSync_t s, strataOuterSyncStats_t* stats) {
  return on_outer(s, [&](strata::OuterSync& o) {
    if (!stats) throw strata::InvalidArgument("strataOuterSyncGetStats: stats is NULL");
    strata::OuterSyncStats st = o.stats();
    *stats = {st.exchanges, st.bytes_sent, st.exposed_s};
  });
}

strataResult_t strataOuterSyncSaveState(strataOuterSync_t s, float* snapshot, float* momentum, long long* steps) {
  return on_outer(s, [&](strata::OuterSync& o) {
    if (!steps) throw strata::InvalidArgument("strataOuterSyncSaveState: steps is NULL");
    o.save_state(snapshot, momentum);
    *steps = o.steps();
  });
}

strataResult_t strataOuterSyncLoadState(strataOuterSync_t s, const float* snapshot, const float* momentum,
                                        long long steps) {
  return on_outer(s, [&](strata::OuterSync& o) { o.load_state(snapshot, momentum, steps); });
}

strataResult_t strataOuterSyncDestroy(strataOuterSync_t s) {
  return guarded([&] {
    live(s);
    outer_registry.remove(s);
    delete s;  // waits for exchanges in flight
    return strataSuccess;
  });
}

}  // extern "C"
