#include "strata_backend.hpp"

namespace perf {

namespace {

// Device memory for the calls and pinned host memory for the loop, the same size; copies
// between them on the backend's stream.
class DeviceBenchBuffer final : public BenchBuffer {
 public:
  DeviceBenchBuffer(size_t bytes, strata::device::Stream s)
      : bytes_(bytes + 4096),
        s_(s),
        dev_(static_cast<std::byte*>(strata::alloc(bytes_))),
        host_(static_cast<std::byte*>(strata::alloc(bytes_, strata::MemoryKind::host))) {
    std::memset(host_, 0, bytes_);
    strata::device::memset_async(dev_, 0, bytes_, s_);
    strata::device::stream_synchronize(s_);
  }
  ~DeviceBenchBuffer() override {
    strata::free(dev_);
    strata::free(host_);
  }
  std::byte* call_data() override { return dev_; }
  std::byte* host_data() override { return host_; }
  void to_call(size_t bytes) override { copy(dev_, host_, bytes); }
  void to_host(size_t bytes) override { copy(host_, dev_, bytes); }

 private:
  void copy(std::byte* dst, const std::byte* src, size_t bytes) {
    strata::device::memcpy_async(dst, src, bytes, s_);
    strata::device::stream_synchronize(s_);
  }
  size_t bytes_;
  strata::device::Stream s_;
  std::byte* dev_;
  std::byte* host_;
};

// Host memory from strata::alloc (--alloc strata): shareable with the node's other ranks.
class SharedHostBuffer final : public BenchBuffer {
 public:
  explicit SharedHostBuffer(size_t bytes) : data_(static_cast<std::byte*>(strata::alloc(bytes + 4096, strata::MemoryKind::host))) {
    std::memset(data_, 0, bytes + 4096);
  }
  ~SharedHostBuffer() override { strata::free(data_); }
  std::byte* call_data() override { return data_; }
  std::byte* host_data() override { return data_; }

 private:
  std::byte* data_;
};

}  // namespace

StrataBackend::StrataBackend(strata::Comm comm, bool device, bool shared)
    : comm_(std::move(comm)), device_(device), shared_(shared) {
  rank_ = comm_.rank();
  size_ = comm_.size();
  if (device_) stream_ = strata::device::stream_create();
}

StrataBackend::~StrataBackend() {
  if (!aborted_ && comm_.valid()) {
    try {
      comm_.destroy();
    } catch (...) {
      // Leaving anyway; the run's status was already decided.
    }
  }
  if (device_ && !aborted_) {
    try {
      strata::device::stream_destroy(stream_);
    } catch (...) {
    }
  }
}

std::unique_ptr<BenchBuffer> StrataBackend::make_buffer(size_t bytes) {
  if (shared_) return std::make_unique<SharedHostBuffer>(bytes);
  if (!device_) return Backend::make_buffer(bytes);
  return std::make_unique<DeviceBenchBuffer>(bytes, stream_);
}

std::string StrataBackend::device_text() const {
  if (shared_) return "[host, strata::alloc] strata";
  if (!device_) return Backend::device_text();
  return std::string("[") + strata::device::backend_name() + "] " + strata::device::device_name();
}

void StrataBackend::finish(strata::Request r) {
  strata::device::stream_synchronize(stream_);
  r.wait();
}

void StrataBackend::run(const CollCall& c) {
  strata::Comm& comm = comm_;
  const DataType t = c.type;
  const strata::device::Stream s = stream_;
  if (const P2p* p = std::get_if<P2p>(&c.coll)) {
    // nccl-tests' ring shift (or the pipeline) as one group.
    const P2pPeers peers = p2p_peers(*p, rank_, size_);
    comm.group_start();
    if (device_) {
      if (peers.send_to >= 0) comm.send(c.send, c.count, t, peers.send_to, s);
      if (peers.recv_from >= 0) comm.recv(c.recv, c.count, t, peers.recv_from, s);
      finish(comm.group_end_async());
      return;
    }
    if (peers.send_to >= 0) comm.send(c.send, c.count, t, peers.send_to);
    if (peers.recv_from >= 0) comm.recv(c.recv, c.count, t, peers.recv_from);
    comm.group_end();
    return;
  }
  switch (std::get<Collective>(c.coll)) {
    case Collective::all_reduce:
      if (device_) return finish(comm.all_reduce(c.send, c.recv, c.count, t, c.op, s));
      comm.all_reduce(c.send, c.recv, c.count, t, c.op);
      return;
    case Collective::reduce_scatter:
      if (device_) return finish(comm.reduce_scatter(c.send, c.recv, c.count, t, c.op, s));
      comm.reduce_scatter(c.send, c.recv, c.count, t, c.op);
      return;
    case Collective::all_gather:
      if (device_) return finish(comm.all_gather(c.send, c.recv, c.count, t, s));
      comm.all_gather(c.send, c.recv, c.count, t);
      return;
    case Collective::broadcast:
      if (device_) return finish(comm.broadcast(c.send, c.recv, c.count, t, c.root, s));
      comm.broadcast(c.send, c.recv, c.count, t, c.root);
      return;
    case Collective::reduce:
      if (device_) return finish(comm.reduce(c.send, c.recv, c.count, t, c.op, c.root, s));
      comm.reduce(c.send, c.recv, c.count, t, c.op, c.root);
      return;
    case Collective::all_to_all:
      if (device_) return finish(comm.all_to_all(c.send, c.recv, c.count, t, s));
      comm.all_to_all(c.send, c.recv, c.count, t);
      return;
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      break;  // not timed (all_colls)
  }
}

void StrataBackend::barrier() { comm_.barrier(); }

double StrataBackend::all_reduce(double v, ScalarOp op) {
  const strata::ReduceOp sop = op == ScalarOp::sum   ? strata::ReduceOp::sum
                               : op == ScalarOp::min ? strata::ReduceOp::min
                                                     : strata::ReduceOp::max;
  double out = 0;
  comm_.all_reduce(&v, &out, 1, strata::DataType::float64, sop);
  return out;
}

void StrataBackend::abort() noexcept {
  aborted_ = true;
  try {
    if (comm_.valid()) comm_.abort();
  } catch (...) {
  }
}

}  // namespace perf
