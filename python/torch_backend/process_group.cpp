#include "process_group.hpp"

#include <Python.h>

#include <algorithm>
#include <stdexcept>

#include "tensors.hpp"

namespace strata_torch {

namespace {

constexpr auto kBytes = strata::DataType::uint8;  // data movement moves bytes, whatever the dtype
const char* const kUniqueIdKey = "strata/unique_id";

[[noreturn]] void refuse(const char* call, const std::string& why) {
  throw std::invalid_argument(std::string("strata: ") + call + ": " + why);
}

char* bytes_of(const at::Tensor& t) { return static_cast<char*>(t.data_ptr()); }

// One send or receive of a grouped call: `bytes` from or into `data`, with `peer`.
struct Transfer {
  void* data;
  size_t bytes;
  int peer;
};

// Posts the transfers as one group: all at once, so their order cannot deadlock. Empty
// ones are left out (the peer leaves out its side too: the sizes agree).
strata::Request post_group(strata::Comm& c, const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs) {
  c.group_start();
  for (const Transfer& t : sends)
    if (t.bytes) c.send_async(t.data, t.bytes, kBytes, t.peer);
  for (const Transfer& t : recvs)
    if (t.bytes) c.recv_async(t.data, t.bytes, kBytes, t.peer);
  return c.group_end_async();
}

// Rank 0's unique id, passed to the others through torch's store.
strata::UniqueId exchange_unique_id(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  strata::UniqueId id;
  if (rank == 0) {
    id = strata::get_unique_id();
    store->set(kUniqueIdKey, std::vector<uint8_t>(id.bytes.begin(), id.bytes.end()));
    return id;
  }
  std::vector<uint8_t> got = store->get(kUniqueIdKey);
  if (got.size() != id.bytes.size())
    throw std::runtime_error("strata: the store holds a unique id of " + std::to_string(got.size()) +
                             " bytes under " + kUniqueIdKey + ", not " + std::to_string(id.bytes.size()));
  std::copy(got.begin(), got.end(), id.bytes.begin());
  return id;
}

// The library's error, rethrown in words that say where it happened.
template <class Fn>
auto translated(const ErrorContext& context, const Fn& fn) {
  try {
    return fn();
  } catch (const strata::Error&) {
    std::rethrow_exception(context.translate(std::current_exception()));
  }
}

}  // namespace

ProcessGroupStrata::ProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, std::vector<int64_t> global_ranks)
    : BackendBase(rank, size), context_(std::make_shared<ErrorContext>()) {
  context_->rank = rank;
  context_->size = size;
  context_->global_ranks = std::move(global_ranks);
  strata::CommOptions options;
  options.timeout_s = std::chrono::duration<double>(timeout).count();
  translated(*context_, [&] {
    coll_.comm = strata::Comm::init_rank(size, exchange_unique_id(store, rank), rank, options);
    up_.comm = coll_.comm.split(0, rank);  // these inherit the timeout
    down_.comm = coll_.comm.split(0, rank);
    return 0;
  });
}

void ProcessGroupStrata::shutdown() {
  // Every issued work completes first (or fails, within the timeout); then the
  // communicators say goodbye to their peers.
  for (Channel* ch : {&coll_, &up_, &down_}) ch->completer.stop();
  for (Channel* ch : {&down_, &up_, &coll_}) {
    try {
      if (ch->comm.valid()) ch->comm.destroy();
    } catch (const std::exception&) {
      // a failed communicator: its error was reported by the works that saw it
    }
  }
}

ProcessGroupStrata::~ProcessGroupStrata() {
  // Python drops the last reference with the GIL held, and a work's future may run a
  // Python callback on the completer thread: let that callback run while we wait.
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* saved = PyEval_SaveThread();
    shutdown();
    PyEval_RestoreThread(saved);
  } else {
    shutdown();
  }
}

c10::intrusive_ptr<StrataWork> ProcessGroupStrata::launch(Channel& ch, c10d::OpType type,
                                                          std::vector<at::Tensor> outputs, const Start& start,
                                                          std::function<void()> finish,
                                                          std::vector<at::Tensor> keep, int source) {
  auto work = c10::make_intrusive<StrataWork>(rank_, type, std::move(outputs), context_, source);
  std::lock_guard lk(issue_m_);
  strata::Request request = translated(*context_, [&] { return start(ch.comm); });
  work->attach(std::move(finish), std::move(keep));
  if (coalescing_ && &ch != &coll_) {
    batch_.emplace_back(work, &ch);  // its request is the batch's, known when the batch ends
  } else {
    work->issued(std::move(request));
    ch.completer.push(work);
  }
  return work;
}

int ProcessGroupStrata::checked_root(int64_t root, const char* call) const {
  if (root < 0 || root >= size_)
    refuse(call, "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size_));
  return static_cast<int>(root);
}

// ---- reductions ----

ProcessGroupStrata::WorkPtr ProcessGroupStrata::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const char* call = "all_reduce";
  at::Tensor& t = single_tensor(tensors, call);
  const auto type = reduction_type(t, opts.reduceOp, call);
  const auto op = reduction_op(opts.reduceOp, call);
  Staged s(t);
  const size_t n = t.numel();
  return launch(
      coll_, c10d::OpType::ALLREDUCE, tensors,
      [&](strata::Comm& c) { return c.all_reduce_async(s.data(), s.data(), n, type, op); }, [s] { s.copy_back(); });
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                    const c10d::AllreduceCoalescedOptions& opts) {
  const char* call = "all_reduce_coalesced";
  if (tensors.empty()) refuse(call, "an empty list of tensors");
  const auto op = reduction_op(opts.reduceOp, call);
  const auto type = reduction_type(tensors[0], opts.reduceOp, call);
  for (const auto& t : tensors) {
    check_host_dense(t, call);
    if (t.scalar_type() != tensors[0].scalar_type()) refuse(call, "tensors of different types in one call");
  }
  at::Tensor flat = pack(tensors);
  const size_t n = byte_size(flat) / tensors[0].element_size();
  return launch(
      coll_, c10d::OpType::ALLREDUCE_COALESCED, tensors,
      [&](strata::Comm& c) { return c.all_reduce_async(flat.data_ptr(), flat.data_ptr(), n, type, op); },
      [flat, tensors]() mutable { unpack(bytes_of(flat), tensors); });
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  const char* call = "reduce";
  at::Tensor& t = single_tensor(tensors, call);
  const auto type = reduction_type(t, opts.reduceOp, call);
  const auto op = reduction_op(opts.reduceOp, call);
  const int root = checked_root(opts.rootRank, call);
  Staged s(t);
  const size_t n = t.numel();
  const bool mine = root == rank_;
  return launch(
      coll_, c10d::OpType::REDUCE, tensors,
      [&](strata::Comm& c) { return c.reduce_async(s.data(), s.data(), n, type, op, root); },
      [s, mine] {
        if (mine) s.copy_back();
      });
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ReduceScatterOptions& opts) {
  const char* call = "reduce_scatter";
  at::Tensor& out = single_tensor(outputs, call);
  const auto type = reduction_type(out, opts.reduceOp, call);
  const auto op = reduction_op(opts.reduceOp, call);
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_)
    refuse(call, "needs one list of " + std::to_string(size_) + " input tensors");
  for (const auto& in : inputs[0]) check_same_shape(in, out, call);
  at::Tensor flat = pack(inputs[0]);
  Staged s(out);
  const size_t n = out.numel();
  return launch(
      coll_, c10d::OpType::REDUCE_SCATTER, outputs,
      [&](strata::Comm& c) { return c.reduce_scatter_async(flat.data_ptr(), s.data(), n, type, op); },
      [s] { s.copy_back(); }, {flat});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::ReduceScatterOptions& opts) {
  const char* call = "reduce_scatter_tensor";
  check_host_dense(output, call);
  check_host_dense(input, call);
  const auto type = reduction_type(output, opts.reduceOp, call);
  const auto op = reduction_op(opts.reduceOp, call);
  if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() * size_)
    refuse(call, "the input must hold group size x the output's elements, of the same type");
  at::Tensor src = input.contiguous();
  Staged s(output);
  const size_t n = output.numel();
  return launch(
      coll_, c10d::OpType::_REDUCE_SCATTER_BASE, {output},
      [&](strata::Comm& c) { return c.reduce_scatter_async(src.data_ptr(), s.data(), n, type, op); },
      [s] { s.copy_back(); }, {src});
}

// ---- data movement: bytes, any dtype ----

ProcessGroupStrata::WorkPtr ProcessGroupStrata::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const char* call = "broadcast";
  at::Tensor& t = single_tensor(tensors, call);
  const int root = checked_root(opts.rootRank, call);
  Staged s(t);
  const size_t n = byte_size(t);
  const bool mine = root == rank_;
  return launch(
      coll_, c10d::OpType::BROADCAST, tensors,
      [&](strata::Comm& c) { return c.broadcast_async(s.data(), s.data(), n, kBytes, root); },
      [s, mine] {
        if (!mine) s.copy_back();
      });
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  const char* call = "all_gather";
  at::Tensor& in = single_tensor(inputs, call);
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_)
    refuse(call, "needs one list of " + std::to_string(size_) + " output tensors");
  std::vector<at::Tensor>& outs = outputs[0];
  for (const auto& o : outs) check_same_shape(o, in, call);
  at::Tensor src = in.contiguous();
  const size_t n = byte_size(in);
  at::Tensor flat = at::empty({static_cast<int64_t>(n * size_)}, at::kByte);
  return launch(
      coll_, c10d::OpType::ALLGATHER, outs,
      [&](strata::Comm& c) { return c.all_gather_async(src.data_ptr(), flat.data_ptr(), n, kBytes); },
      [flat, outs]() mutable { unpack(bytes_of(flat), outs); }, {src});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::AllgatherOptions& opts) {
  const char* call = "all_gather_into_tensor";
  check_host_dense(output, call);
  check_host_dense(input, call);
  if (input.scalar_type() != output.scalar_type() || output.numel() != input.numel() * size_)
    refuse(call, "the output must hold group size x the input's elements, of the same type");
  at::Tensor src = input.contiguous();
  Staged s(output);
  const size_t n = byte_size(input);
  return launch(
      coll_, c10d::OpType::_ALLGATHER_BASE, {output},
      [&](strata::Comm& c) { return c.all_gather_async(src.data_ptr(), s.data(), n, kBytes); },
      [s] { s.copy_back(); }, {src});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                    std::vector<at::Tensor>& inputs,
                                                                    const c10d::AllgatherOptions& opts) {
  const char* call = "all_gather_coalesced";
  if (static_cast<int>(outputs.size()) != size_)
    refuse(call, "needs " + std::to_string(size_) + " output lists, one per rank");
  for (auto& list : outputs) {
    if (list.size() != inputs.size()) refuse(call, "each output list must match the input list");
    for (size_t i = 0; i < list.size(); ++i) check_same_shape(list[i], inputs[i], call);
  }
  at::Tensor packed = pack(inputs);
  const size_t n = byte_size(packed);
  at::Tensor flat = at::empty({static_cast<int64_t>(n * size_)}, at::kByte);
  std::vector<at::Tensor> all;
  for (auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
  return launch(
      coll_, c10d::OpType::ALLGATHER_COALESCED, all,
      [&](strata::Comm& c) { return c.all_gather_async(packed.data_ptr(), flat.data_ptr(), n, kBytes); },
      [flat, outputs]() mutable {
        const char* p = bytes_of(flat);
        for (auto& list : outputs) p = unpack(p, list);
      },
      {packed});
}

// gather, scatter and uneven all-to-all are grouped point-to-point transfers on the
// collective communicator: every rank issues them at the same point of its collectives.

ProcessGroupStrata::WorkPtr ProcessGroupStrata::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::GatherOptions& opts) {
  const char* call = "gather";
  at::Tensor& in = single_tensor(inputs, call);
  const int root = checked_root(opts.rootRank, call);
  std::vector<Staged> outs;
  if (rank_ == root) {
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_)
      refuse(call, "the root needs one list of " + std::to_string(size_) + " output tensors");
    for (const auto& o : outputs[0]) {
      check_same_shape(o, in, call);
      outs.emplace_back(o);
    }
  }
  at::Tensor src = in.contiguous();
  const size_t n = byte_size(in);
  std::vector<Transfer> recvs;
  for (int r = 0; r < static_cast<int>(outs.size()); ++r) recvs.push_back({outs[r].data(), n, r});
  return launch(
      coll_, c10d::OpType::GATHER, outputs.empty() ? std::vector<at::Tensor>{} : outputs[0],
      [&](strata::Comm& c) { return post_group(c, {{src.data_ptr(), n, root}}, recvs); },
      [outs] {
        for (const auto& s : outs) s.copy_back();
      },
      {src});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::scatter(std::vector<at::Tensor>& outputs,
                                                        std::vector<std::vector<at::Tensor>>& inputs,
                                                        const c10d::ScatterOptions& opts) {
  const char* call = "scatter";
  at::Tensor& out = single_tensor(outputs, call);
  const int root = checked_root(opts.rootRank, call);
  std::vector<at::Tensor> srcs;
  if (rank_ == root) {
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_)
      refuse(call, "the root needs one list of " + std::to_string(size_) + " input tensors");
    for (const auto& in : inputs[0]) {
      check_same_shape(in, out, call);
      srcs.push_back(in.contiguous());
    }
  }
  Staged s(out);
  const size_t n = byte_size(out);
  std::vector<Transfer> sends;
  for (int r = 0; r < static_cast<int>(srcs.size()); ++r) sends.push_back({srcs[r].data_ptr(), n, r});
  return launch(
      coll_, c10d::OpType::SCATTER, outputs,
      [&](strata::Comm& c) { return post_group(c, sends, {{s.data(), n, root}}); },
      [s] { s.copy_back(); }, srcs);
}

namespace {

// Rows of dim 0 per rank: the given splits, or equal ones.
std::vector<int64_t> row_splits(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* call,
                                const char* which) {
  if (t.dim() == 0) refuse(call, std::string("a 0-dimensional ") + which + " tensor cannot be split");
  const int64_t rows = t.size(0);
  if (splits.empty()) {
    if (rows % size) refuse(call, std::string(which) + "'s " + std::to_string(rows) + " rows do not split evenly");
    return std::vector<int64_t>(size, rows / size);
  }
  if (static_cast<int>(splits.size()) != size)
    refuse(call, std::string(which) + " split sizes must have one entry per rank");
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) refuse(call, "a negative split size");
    sum += s;
  }
  if (sum != rows) refuse(call, std::string(which) + " split sizes add up to " + std::to_string(sum) + ", not " +
                                    std::to_string(rows) + " rows");
  return splits;
}

}  // namespace

ProcessGroupStrata::WorkPtr ProcessGroupStrata::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
  const char* call = "all_to_all_single";
  check_host_dense(output, call);
  check_host_dense(input, call);
  if (input.scalar_type() != output.scalar_type()) refuse(call, "input and output of different types");
  Staged s(output);
  if (output_splits.empty() && input_splits.empty()) {
    if (input.numel() != output.numel() || input.numel() % size_)
      refuse(call, "input and output must hold the same number of elements, a multiple of the group size");
    at::Tensor src = input.contiguous();
    const size_t n = byte_size(input) / size_;
    return launch(
        coll_, c10d::OpType::ALLTOALL_BASE, {output},
        [&](strata::Comm& c) { return c.all_to_all_async(src.data_ptr(), s.data(), n, kBytes); },
        [s] { s.copy_back(); }, {src});
  }
  const auto in_rows = row_splits(input, input_splits, size_, call, "input");
  const auto out_rows = row_splits(output, output_splits, size_, call, "output");
  const size_t in_row = input.size(0) ? byte_size(input) / input.size(0) : 0;
  const size_t out_row = output.size(0) ? byte_size(output) / output.size(0) : 0;
  // Sends and receives are posted at once: an input that shares memory with the output
  // is read from a copy.
  at::Tensor src = input.contiguous();
  if (src.storage().is_alias_of(s.buffer.storage())) src = src.clone();
  std::vector<Transfer> sends, recvs;
  size_t in_at = 0, out_at = 0;
  for (int r = 0; r < size_; ++r) {
    sends.push_back({bytes_of(src) + in_at, in_rows[r] * in_row, r});
    recvs.push_back({static_cast<char*>(s.data()) + out_at, out_rows[r] * out_row, r});
    in_at += sends.back().bytes;
    out_at += recvs.back().bytes;
  }
  return launch(
      coll_, c10d::OpType::ALLTOALL_BASE, {output}, [&](strata::Comm& c) { return post_group(c, sends, recvs); },
      [s] { s.copy_back(); }, {src});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  const char* call = "all_to_all";
  if (static_cast<int>(outputs.size()) != size_ || static_cast<int>(inputs.size()) != size_)
    refuse(call, "needs " + std::to_string(size_) + " input and output tensors");
  std::vector<at::Tensor> srcs;
  std::vector<Staged> outs;
  std::vector<Transfer> sends, recvs;
  for (int r = 0; r < size_; ++r) {
    check_host_dense(inputs[r], call);
    check_host_dense(outputs[r], call);
    srcs.push_back(inputs[r].contiguous().clone());  // outputs may alias inputs; all transfers are posted at once
    outs.emplace_back(outputs[r]);
    sends.push_back({srcs[r].data_ptr(), byte_size(srcs[r]), r});
    recvs.push_back({outs[r].data(), byte_size(outs[r].buffer), r});
  }
  return launch(
      coll_, c10d::OpType::ALLTOALL, outputs, [&](strata::Comm& c) { return post_group(c, sends, recvs); },
      [outs] {
        for (const auto& s : outs) s.copy_back();
      },
      srcs);
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::barrier(const c10d::BarrierOptions& opts) {
  return launch(coll_, c10d::OpType::BARRIER, {}, [](strata::Comm& c) { return c.barrier_async(); });
}

// ---- point-to-point: a communicator per direction. Tags are not used for matching:
// messages from one rank to another match in the order they are posted (as with torch's
// NCCL backend).

ProcessGroupStrata::WorkPtr ProcessGroupStrata::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const char* call = "send";
  at::Tensor src = single_tensor(tensors, call).contiguous();
  const size_t n = byte_size(src);
  return launch(
      p2p(rank_, dst), c10d::OpType::SEND, {},
      [&](strata::Comm& c) { return n ? c.send_async(src.data_ptr(), n, kBytes, dst) : strata::Request(); }, nullptr,
      {src});
}

ProcessGroupStrata::WorkPtr ProcessGroupStrata::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const char* call = "recv";
  Staged s(single_tensor(tensors, call));
  const size_t n = byte_size(s.buffer);
  return launch(
      p2p(src, rank_), c10d::OpType::RECV, tensors,
      [&](strata::Comm& c) { return n ? c.recv_async(s.data(), n, kBytes, src) : strata::Request(); },
      [s] { s.copy_back(); }, {}, src);
}

void ProcessGroupStrata::startCoalescing() {
  std::lock_guard lk(issue_m_);
  if (coalescing_) throw std::logic_error("strata: batches of point-to-point calls do not nest");
  up_.comm.group_start();
  down_.comm.group_start();
  coalescing_ = true;
}

void ProcessGroupStrata::end_batch(const c10::intrusive_ptr<StrataWork>& batch_work) {
  std::lock_guard lk(issue_m_);
  if (!coalescing_) throw std::logic_error("strata: endCoalescing without startCoalescing");
  coalescing_ = false;
  strata::Request up, down;
  std::exception_ptr error;
  for (auto [ch, request] : {std::pair{&up_, &up}, std::pair{&down_, &down}}) {
    try {
      *request = ch->comm.group_end_async();  // both groups end, even when one fails
    } catch (...) {
      if (!error) error = context_->translate(std::current_exception());
    }
  }
  auto batch = std::move(batch_);
  batch_.clear();
  if (error) std::rethrow_exception(error);
  for (auto& [w, ch] : batch) {
    w->issued(ch == &up_ ? up : down);
    ch->completer.push(w);
  }
  if (batch_work) {  // the whole batch: both directions
    batch_work->attach([down]() mutable { down.wait(); }, {});
    batch_work->issued(up);
    up_.completer.push(batch_work);
  }
}

#ifdef STRATA_TORCH_END_COALESCING_RETURNS_WORK
ProcessGroupStrata::WorkPtr ProcessGroupStrata::endCoalescing() {
  auto work = c10::make_intrusive<StrataWork>(rank_, c10d::OpType::UNKNOWN, std::vector<at::Tensor>{}, context_);
  end_batch(work);
  return work;
}
#else
void ProcessGroupStrata::endCoalescing(std::vector<WorkPtr>& /* works: the same as batch_ */) {
  end_batch(c10::intrusive_ptr<StrataWork>());
}
#endif

}  // namespace strata_torch
