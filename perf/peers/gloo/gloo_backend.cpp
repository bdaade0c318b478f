#include "gloo_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

namespace perf {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

template <typename T>
const gloo::ReductionFunction<T>* reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return gloo::ReductionFunction<T>::product;
    case ReduceOp::max: return gloo::ReductionFunction<T>::max;
    case ReduceOp::min: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

template <typename T>
std::unique_ptr<gloo::Algorithm> make(const std::shared_ptr<gloo::Context>& ctx, const std::string& algo,
                                      const CollCall& c) {
  T* out = static_cast<T*>(c.recv);
  int n = static_cast<int>(c.count);
  if (c.coll == Coll(Collective::all_reduce)) {
    auto fn = reduction<T>(c.op);
    if (algo == "ring") return std::make_unique<gloo::AllreduceRing<T>>(ctx, std::vector<T*>{out}, n, fn);
    if (algo == "halving_doubling")
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx, std::vector<T*>{out}, n, fn);
    return std::make_unique<gloo::AllreduceRingChunked<T>>(ctx, std::vector<T*>{out}, n, fn);
  }
  if (c.coll == Coll(Collective::broadcast))
    return std::make_unique<gloo::BroadcastOneToAll<T>>(ctx, std::vector<T*>{out}, n, c.root);
  if (c.coll == Coll(Collective::all_gather))
    return std::make_unique<gloo::AllgatherRing<T>>(ctx, std::vector<const T*>{static_cast<const T*>(c.send)}, out, n);
  throw std::runtime_error("gloo-perf: collective not supported");
}

}  // namespace

GlooBackend::GlooBackend() {
  rank_ = env_int("STRATA_RANK", 0);
  size_ = env_int("STRATA_WORLD_SIZE", 1);
  const char* algo = std::getenv("GLOO_PERF_ALGO");
  algo_ = algo ? algo : "ring_chunked";
  // One store directory per job: strata-run gives every job a fresh secret (the root port
  // repeats: it is fixed with --hosts).
  const char* secret = std::getenv("STRATA_SECRET");
  std::string dir = std::string("/tmp/gloo-perf-") + (secret ? secret : "single");
  std::string mk = "mkdir -p " + dir;
  if (std::system(mk.c_str()) != 0) throw std::runtime_error("cannot create " + dir);
  gloo::rendezvous::FileStore store(dir);
  // GLOO_SOCKET_IFNAME (as in PyTorch) picks the interface, e.g. eth0 between emulated hosts.
  gloo::transport::tcp::attr attr("127.0.0.1");
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    attr = gloo::transport::tcp::attr();
    attr.iface = ifname;
  }
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  ctx_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  ctx_->connectFullMesh(store, dev);
  // Everyone is connected: the store has done its job.
  gloo::BarrierAllToAll(ctx_).run();
  if (rank_ == 0) std::filesystem::remove_all(dir);
}

bool GlooBackend::supports(const Coll& c, DataType t, ReduceOp op) const {
  bool type_ok = t == DataType::float32 || t == DataType::float64 || t == DataType::int32 || t == DataType::int64;
  if (c == Coll(Collective::all_reduce)) return type_ok && op != ReduceOp::avg;
  return type_ok && (c == Coll(Collective::broadcast) || c == Coll(Collective::all_gather));
}

gloo::Algorithm& GlooBackend::algorithm(const CollCall& c) {
  auto key = std::make_tuple(c.coll, c.send, c.recv, c.count, static_cast<int>(c.type),
                             static_cast<int>(c.op), c.root);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  std::unique_ptr<gloo::Algorithm> a;
  switch (c.type) {
    case DataType::float32: a = make<float>(ctx_, algo_, c); break;
    case DataType::float64: a = make<double>(ctx_, algo_, c); break;
    case DataType::int32: a = make<int32_t>(ctx_, algo_, c); break;
    default: a = make<int64_t>(ctx_, algo_, c); break;
  }
  return *cache_.emplace(key, std::move(a)).first->second;
}

void GlooBackend::run(const CollCall& c) {
  // Gloo's all-reduce and broadcast work in place: out of place copies first, as a user would.
  bool copy_first = (c.coll == Coll(Collective::all_reduce) ||
                     (c.coll == Coll(Collective::broadcast) && c.root == rank_)) && c.send != c.recv;
  if (copy_first) std::memcpy(c.recv, c.send, c.count * size_of(c.type));
  algorithm(c).run();
}

void GlooBackend::barrier() { gloo::BarrierAllToAll(ctx_).run(); }

double GlooBackend::all_reduce(double v, ScalarOp op) {
  double x = v;
  auto fn = op == ScalarOp::min   ? gloo::ReductionFunction<double>::min
            : op == ScalarOp::max ? gloo::ReductionFunction<double>::max
                                  : gloo::ReductionFunction<double>::sum;
  gloo::AllreduceRing<double>(ctx_, {&x}, 1, fn).run();
  return x;
}

}  // namespace perf
